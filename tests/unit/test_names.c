/*
 * test_names.c - the named-region table (daemon/names.c): names per
 * namespace, create / exists / open / unlink / create again, handles and
 * their side map, the id-ordered listing and its paging, bad input, and
 * enough objects and handles to make both hashes grow.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "names.h"
#include "tap.h"

/* Namespaces are tenant pointers, never dereferenced here. */
static const struct config_tenant *const ns_a = (const struct config_tenant *)0x1000;
static const struct config_tenant *const ns_b = (const struct config_tenant *)0x2000;

#define RW (PROTO_ACCESS_READ | PROTO_ACCESS_WRITE)

static struct name_obj *add(struct names *n, const struct config_tenant *ns, const char *name)
{
	return names_add(n, ns, name, strlen(name), 0, 4096, 64, ns, 7);
}

static struct name_obj *find(struct names *n, const struct config_tenant *ns, const char *name)
{
	return names_lookup(n, ns, name, strlen(name));
}

static void test_valid(void)
{
	char longest[PROTO_NAME_MAX + 2];

	memset(longest, 'x', sizeof longest);
	ok(names_valid("a", 1) == 0 && names_valid("t/a/b~!", 7) == 0,
	   "names of printable bytes, with '/', are valid");
	ok(names_valid(longest, PROTO_NAME_MAX) == 0 &&
	   names_valid(longest, PROTO_NAME_MAX + 1) == -EINVAL,
	   "255 bytes are valid, 256 are not");
	ok(names_valid("", 0) == -EINVAL && names_valid("a b", 3) == -EINVAL &&
	   names_valid("a\tb", 3) == -EINVAL && names_valid("a\x7f", 2) == -EINVAL &&
	   names_valid("\xc3\xa9", 2) == -EINVAL && names_valid("a\0b", 3) == -EINVAL,
	   "empty, space, tab, DEL, non-ASCII and NUL are -EINVAL");
	ok(names_access_valid(PROTO_ACCESS_READ) == 0 && names_access_valid(PROTO_ACCESS_WRITE) == 0 &&
	   names_access_valid(RW) == 0, "READ, WRITE and both are valid access");
	ok(names_access_valid(0) == -EINVAL && names_access_valid(4) == -EINVAL &&
	   names_access_valid(RW | 0x80000000u) == -EINVAL, "0 and unknown bits are -EINVAL");
}

static void test_lifecycle(void)
{
	struct names *n = names_new();
	struct name_obj *o, *o2, *ob;

	ok(n && names_count(n) == 0 && names_next_after(n, 0) == NULL, "a new table is empty");
	if (!n)
		return;
	o = add(n, ns_a, "t/a");
	ok(o && o->id == 1 && o->handles == 0 && !o->unlinked && o->length == 64 &&
	   o->offset == 4096 && o->charged == ns_a && o->created_ns == 7 &&
	   o->name_len == 3 && !strcmp(o->name, "t/a"), "added: id 1, fields as given");
	ok(find(n, ns_a, "t/a") == o, "it exists in its namespace");
	ok(find(n, ns_b, "t/a") == NULL && find(n, NULL, "t/a") == NULL,
	   "and not in another, nor in the anonymous one");
	ok(find(n, ns_a, "t/") == NULL && find(n, ns_a, "t/ab") == NULL,
	   "a prefix or a longer name is another name");
	errno = 0;
	ok(add(n, ns_a, "t/a") == NULL && errno == EEXIST, "adding it again: EEXIST");
	ob = add(n, ns_b, "t/a");
	ok(ob && ob != o && ob->id == 2 && find(n, ns_b, "t/a") == ob,
	   "the same name in another namespace is another object");
	errno = 0;
	ok(names_add(n, ns_a, "a b", 3, 0, 0, 64, NULL, 0) == NULL && errno == EINVAL,
	   "a bad name: EINVAL");
	names_unlink(n, o);
	ok(o->unlinked && find(n, ns_a, "t/a") == NULL && names_count(n) == 2,
	   "unlinked: the name is gone, the object stays");
	names_unlink(n, o);
	ok(o->unlinked && names_count(n) == 2, "unlinking twice is harmless");
	o2 = add(n, ns_a, "t/a");
	ok(o2 && o2 != o && o2->id == 3 && find(n, ns_a, "t/a") == o2,
	   "the name can be added again: a new object, a new id");
	names_remove(n, o);
	ok(names_count(n) == 2 && names_next_after(n, 0) == ob, "removed: the list skips it");
	names_remove(n, o2);
	ok(find(n, ns_a, "t/a") == NULL && names_count(n) == 1,
	   "removing a linked object unlinks it first");
	names_free(n); /* with ob still in it: LeakSanitizer checks */
	names_free(NULL);
}

static void test_handles(void)
{
	struct names *n = names_new();
	struct name_obj *o, *p;
	struct name_handle *h;
	int holder;
	int seen = 0;

	if (!n)
		return;
	o = add(n, NULL, "h");
	p = add(n, NULL, "other");
	ok(names_handle_add(n, o, 10, PROTO_ACCESS_READ, &holder) == 0 &&
	   names_handle_add(n, o, 11, RW, &holder) == 0 &&
	   names_handle_add(n, p, 12, PROTO_ACCESS_WRITE, NULL) == 0,
	   "three handles added");
	ok(o->handles == 2 && p->handles == 1 && names_handle_count(n) == 3,
	   "counted per object and in all");
	h = names_handle_find(n, 10);
	ok(h && h->obj == o && h->access == PROTO_ACCESS_READ && h->holder == &holder,
	   "found by region id: object, access and holder");
	ok(names_handle_find(n, 12)->obj == p && names_handle_find(n, 13) == NULL,
	   "another id, another object; an unknown id: none");
	ok(names_handle_add(n, o, 10, RW, NULL) == -EEXIST &&
	   names_handle_add(n, o, 14, 0, NULL) == -EINVAL &&
	   names_handle_add(n, o, 14, 8, NULL) == -EINVAL && o->handles == 2,
	   "a region id twice: -EEXIST; bad access: -EINVAL; nothing counted");
	for (h = names_handle_first(o); h; h = names_handle_next(h))
		seen |= names_handle_region(h) == 10 ? 1 : names_handle_region(h) == 11 ? 2 : 4;
	ok(seen == 3, "the object's list holds its two handles only");
	names_handle_remove(n, names_handle_find(n, 10));
	ok(o->handles == 1 && names_handle_find(n, 10) == NULL &&
	   names_handle_first(o) == names_handle_find(n, 11) && names_handle_count(n) == 2,
	   "a handle removed: the object has one fewer and stays");
	names_unlink(n, o);
	ok(names_handle_find(n, 11) && o->handles == 1,
	   "unlinking keeps the handles (they work until released)");
	names_remove(n, o);
	ok(names_handle_find(n, 11) == NULL && names_handle_count(n) == 1,
	   "removing an object forgets its handles");
	names_free(n);
}

/* Many objects and handles: both hashes grow; the listing pages in id order. */
static void test_many(void)
{
	enum { M = 3000 };
	struct names *n = names_new();
	char name[32];
	uint64_t last = 0, seen = 0, after = 0;
	int found = 1, pages = 0, order = 1;

	if (!n)
		return;
	for (int i = 0; i < M; i++) {
		struct name_obj *o;

		snprintf(name, sizeof name, "m/%d", i);
		o = add(n, i % 2 ? ns_a : ns_b, name);
		if (!o || names_handle_add(n, o, 1000 + (uint64_t)i, RW, NULL) < 0) {
			ok(0, "object %d added", i);
			names_free(n);
			return;
		}
	}
	for (int i = 0; i < M; i++) {
		struct name_obj *o;
		struct name_handle *h;

		snprintf(name, sizeof name, "m/%d", i);
		o = find(n, i % 2 ? ns_a : ns_b, name);
		h = names_handle_find(n, 1000 + (uint64_t)i);
		found &= o && o->id == (uint64_t)i + 1 && h && h->obj == o &&
			 !find(n, i % 2 ? ns_b : ns_a, name);
	}
	ok(found && names_count(n) == M && names_handle_count(n) == M,
	   "%d objects and handles, each found after the hashes grew", M);
	/* Every third name unlinked and its handle gone: the unlinked with no
	 * handle are removed, as session.c does. */
	for (struct name_obj *o = names_next_after(n, 0), *next; o; o = next) {
		next = names_next(o);
		if (o->id % 3 == 0)
			names_remove(n, o);
	}
	/* Pages of 100 through the listing, as NAMES does. */
	do {
		int k = 0;
		struct name_obj *o = names_next_after(n, after);

		for (; o && k < 100; o = names_next(o), k++) {
			order &= o->id > last && o->id % 3 != 0;
			last = o->id;
			seen++;
		}
		after = last;
		pages++;
		if (!o)
			break;
	} while (pages < M);
	ok(order && seen == names_count(n) && seen == M - M / 3,
	   "the listing pages through in id order, skipping removed ids (%llu in %d pages)",
	   (unsigned long long)seen, pages);
	ok(names_next_after(n, 3) && names_next_after(n, 3)->id == 4 &&
	   names_next_after(n, (uint64_t)M) == NULL,
	   "after a removed id: the next one; after the last: none");
	names_free(n);
}

int main(void)
{
	test_valid();
	test_lifecycle();
	test_handles();
	test_many();
	return tap_done();
}
