/*
 * replay.c - main() for a libFuzzer target built without libFuzzer: replays
 * the files and directories given as arguments (default: FUZZ_CORPUS_DIR) and
 * reports one TAP line per file, so `make test` runs a corpus with gcc and
 * ASan.  A target aborts on a failed check; reaching the next line is the pass.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"
#include "tap.h"

#ifndef FUZZ_CORPUS_DIR
#error "define FUZZ_CORPUS_DIR"
#endif

/* The input being replayed, for the one line a failed check leaves. */
static const char *current = "";

static void on_abort(int sig)
{
	(void)sig;
	if (write(2, "aborted while replaying ", 24) < 0 ||
	    write(2, current, strlen(current)) < 0 || write(2, "\n", 1) < 0)
		_exit(134);
	signal(SIGABRT, SIG_DFL);
	raise(SIGABRT);
}

/* The whole file in *buf (malloc'ed, never NULL on success). */
static int slurp(const char *path, uint8_t **buf, size_t *size)
{
	FILE *f = fopen(path, "rb");
	uint8_t *data = NULL;
	size_t cap = 0, n = 0, got;
	int rc = 0;

	if (!f)
		return -errno;
	do {
		if (n == cap) {
			size_t bigger = cap ? 2 * cap : 4096;
			uint8_t *p = realloc(data, bigger);

			if (!p) {
				rc = -ENOMEM;
				break;
			}
			data = p;
			cap = bigger;
		}
		got = fread(data + n, 1, cap - n, f);
		n += got;
	} while (got > 0);
	if (rc == 0 && ferror(f))
		rc = -EIO;
	fclose(f);
	if (rc < 0) {
		free(data);
		return rc;
	}
	*buf = data;
	*size = n;
	return 0;
}

static void replay_file(const char *path)
{
	uint8_t *data = NULL;
	size_t size = 0;
	int rc = slurp(path, &data, &size);

	current = path;
	if (rc == 0)
		LLVMFuzzerTestOneInput(data, size);
	ok(rc == 0, "replay %s (%zu bytes)%s%s", path, size, rc ? ": " : "",
	   rc ? strerror(-rc) : "");
	free(data);
}

static int is_dir(const char *path)
{
	struct stat sb;

	return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* Every regular file of dir, in name order; returns how many, or -errno. */
static int replay_dir(const char *dir)
{
	struct dirent **names;
	int n = scandir(dir, &names, NULL, alphasort);
	int done = 0;

	if (n < 0)
		return -errno;
	for (int i = 0; i < n; i++) {
		char path[4096];
		struct stat sb;
		int len = snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name);

		if (len > 0 && (size_t)len < sizeof path && stat(path, &sb) == 0 &&
		    S_ISREG(sb.st_mode)) {
			replay_file(path);
			done++;
		}
		free(names[i]);
	}
	free(names);
	return done;
}

int main(int argc, char **argv)
{
	int files = 0;

	signal(SIGABRT, on_abort);
	if (argc < 2) {
		files = replay_dir(FUZZ_CORPUS_DIR);
		if (files <= 0)
			tap_skip_all("no corpus at " FUZZ_CORPUS_DIR);
	}
	for (int i = 1; i < argc; i++) {
		int n;

		if (!is_dir(argv[i])) {
			replay_file(argv[i]);
			files++;
			continue;
		}
		n = replay_dir(argv[i]);
		if (n < 0)
			ok(0, "list %s: %s", argv[i], strerror(-n));
		else
			files += n;
	}
	diag("%d inputs replayed", files);
	return tap_done();
}
