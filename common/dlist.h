/*
 * dlist.h - the two steps of an intrusive doubly-linked list kept in order of
 * arrival: append at the tail, remove from anywhere, both O(1).  A node is
 * any struct with prev and next pointers to its own type; the head any struct
 * with first and last.  Macros, so that each list keeps its own types (and
 * the compiler checks them) without a container_of.
 */
#ifndef RMEM_COMMON_DLIST_H
#define RMEM_COMMON_DLIST_H

#include <stddef.h>

/* node (not in the list) becomes head's last. */
#define DLIST_APPEND(head, node)					\
	do {								\
		(node)->prev = (head)->last;				\
		(node)->next = NULL;					\
		if ((head)->last)					\
			(head)->last->next = (node);			\
		else							\
			(head)->first = (node);				\
		(head)->last = (node);					\
	} while (0)

/* node (in head's list) leaves it; its own pointers are left as they were. */
#define DLIST_REMOVE(head, node)					\
	do {								\
		if ((node)->prev)					\
			(node)->prev->next = (node)->next;		\
		else							\
			(head)->first = (node)->next;			\
		if ((node)->next)					\
			(node)->next->prev = (node)->prev;		\
		else							\
			(head)->last = (node)->prev;			\
	} while (0)

#endif /* RMEM_COMMON_DLIST_H */
