/*-------------------------------------------------------------------------
 *
 * replay.c
 *	  Run saved fuzzer inputs through a target's checks (fuzz_format.c, or
 *	  the file -DFUZZ_TARGET_FILE names), without the fuzzer runtime: the
 *	  regression test for everything the fuzzer found.
 *
 *	  replay DIR|FILE ...
 *
 * Every regular file (names starting with '.' skipped) is checked in a
 * child process, so an abort() or a sanitizer report fails that file and
 * the rest still run.  Prints "ok - FILE" or "not ok - FILE (why)" per
 * file, then "N passed, N failed"; exits 1 on any failure.
 *
 *-------------------------------------------------------------------------
 */
/* the target whose checks run: fuzz_format.c unless the build names another */
#ifndef FUZZ_TARGET_FILE
#define FUZZ_TARGET_FILE "fuzz_format.c"
#endif
#include FUZZ_TARGET_FILE

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static int	npassed = 0;
static int	nfailed = 0;

/* read a whole file; NULL with errno set on failure */
static unsigned char *
read_file(const char *path, size_t *len)
{
	FILE	   *f = fopen(path, "rb");
	unsigned char *buf = NULL;
	size_t		cap = 0,
				n = 0;

	if (f == NULL)
		return NULL;
	for (;;)
	{
		if (n == cap)
		{
			unsigned char *nb;

			cap = cap ? 2 * cap : 4096;
			if ((nb = realloc(buf, cap)) == NULL)
			{
				free(buf);
				fclose(f);
				errno = ENOMEM;
				return NULL;
			}
			buf = nb;
		}
		n += fread(buf + n, 1, cap - n, f);
		if (ferror(f))
		{
			free(buf);
			fclose(f);
			errno = EIO;
			return NULL;
		}
		if (feof(f))
			break;
	}
	fclose(f);
	*len = n;
	return buf;
}

/* check one file in a child; print its ok / not ok line */
static void
replay_file(const char *path)
{
	pid_t		pid;
	int			status;

	fflush(stdout);
	fflush(stderr);
	if ((pid = fork()) < 0)
	{
		printf("not ok - %s (fork: %s)\n", path, strerror(errno));
		nfailed++;
		return;
	}
	if (pid == 0)
	{
		size_t		len;
		unsigned char *buf = read_file(path, &len);

		if (buf == NULL)
		{
			fprintf(stderr, "replay: cannot read %s: %s\n", path, strerror(errno));
			_exit(2);
		}
		LLVMFuzzerTestOneInput(buf, len);
		free(buf);
		exit(0);				/* exit, not _exit: let LeakSanitizer run */
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
		{
			printf("not ok - %s (waitpid: %s)\n", path, strerror(errno));
			nfailed++;
			return;
		}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
	{
		printf("ok - %s\n", path);
		npassed++;
	}
	else
	{
		if (WIFSIGNALED(status))
			printf("not ok - %s (signal %d: %s)\n", path, WTERMSIG(status),
				   strsignal(WTERMSIG(status)));
		else
			printf("not ok - %s (exit status %d)\n", path, WEXITSTATUS(status));
		nfailed++;
	}
}

static int
cmp_names(const void *a, const void *b)
{
	return strcmp(*(const char *const *) a, *(const char *const *) b);
}

/* every regular, non-hidden file of a directory, in name order */
static void
replay_dir(const char *dir)
{
	DIR		   *d = opendir(dir);
	struct dirent *e;
	char	  **names = NULL;
	size_t		n = 0,
				cap = 0;

	if (d == NULL)
	{
		printf("not ok - %s (opendir: %s)\n", dir, strerror(errno));
		nfailed++;
		return;
	}
	while ((e = readdir(d)) != NULL)
	{
		char		path[4096];
		struct stat sb;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
			continue;
		if (n == cap)
		{
			cap = cap ? 2 * cap : 64;
			if ((names = realloc(names, cap * sizeof(char *))) == NULL)
			{
				fprintf(stderr, "replay: out of memory\n");
				exit(1);
			}
		}
		if ((names[n++] = strdup(path)) == NULL)
		{
			fprintf(stderr, "replay: out of memory\n");
			exit(1);
		}
	}
	closedir(d);
	qsort(names, n, sizeof(char *), cmp_names);
	for (size_t i = 0; i < n; i++)
	{
		replay_file(names[i]);
		free(names[i]);
	}
	free(names);
}

int
main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
	{
		struct stat sb;

		if (stat(argv[i], &sb) != 0)
		{
			printf("not ok - %s (%s)\n", argv[i], strerror(errno));
			nfailed++;
		}
		else if (S_ISDIR(sb.st_mode))
			replay_dir(argv[i]);
		else
			replay_file(argv[i]);
	}
	printf("%d passed, %d failed\n", npassed, nfailed);
	return nfailed > 0;
}
