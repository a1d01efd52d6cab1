/*
 * version.c - rmem_version(): the version this library was built as, which
 * is rmem.h's (the Makefile's VERSION agrees; tests/func/test_static.sh
 * checks both against the map's newest node).
 */
#include "rmem.h"

uint32_t rmem_version(void)
{
	return RMEM_VERSION;
}
