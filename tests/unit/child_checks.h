/* What the tests of programs run as children check after them: this
 * process's open descriptors, and whether a process has ended.
 * defines: count_fds, process_dead */
#ifndef RL_TEST_CHILD_CHECKS_H
#define RL_TEST_CHILD_CHECKS_H

#include <criterion/criterion.h>
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>
#include <unistd.h>

/* The entries of /proc/self/fd (the same count before and after a call
 * means it leaked none). */
static inline int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	cr_assert_not_null(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/* pid has ended within a second (a zombie whose reaper is slow counts:
 * it runs no more). */
static inline bool process_dead(pid_t pid)
{
	for (int tries = 0; tries < 100; tries++) {
		char path[64], state = 0;

		snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
		FILE *f = fopen(path, "r");

		if (!f)
			return true;
		int got = fscanf(f, "%*d (%*[^)]) %c", &state);

		fclose(f);
		if (got == 1 && (state == 'Z' || state == 'X'))
			return true;
		usleep(10000);
	}
	return false;
}

#endif
