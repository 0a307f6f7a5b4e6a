/* The reward program's first words read as sh reads them (quotes and
 * backslashes), far enough to find the program, and no further: whatever
 * needs the shell to expand is left to the shell. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/reward/program_check.h"

#define WORD_MAX 4096

enum { WORD_END = 0, WORD_OK = 1, WORD_UNKNOWN = -1 };

struct word {
	char text[WORD_MAX];
	bool assignment; /* NAME=value, NAME unquoted */
};

static bool name_char(char c, bool first)
{
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (!first && c >= '0' && c <= '9');
}

/* The next word of *s into w: WORD_OK, WORD_END at the end of the first
 * command, WORD_UNKNOWN where only the shell could tell what it is. */
static int next_word(const char **s, struct word *w)
{
	const char *p = *s;
	size_t n = 0;
	bool name_so_far = true;

	while (*p == ' ' || *p == '\t')
		p++;
	if (!*p || *p == '\n' || *p == '#')
		return WORD_END;
	w->assignment = false;
	while (*p && *p != ' ' && *p != '\t' && *p != '\n') {
		char c = *p;

		if (n + 2 >= WORD_MAX || strchr("|&;<>()$`*?[{}~", c))
			return WORD_UNKNOWN;
		if (c == '\\') {
			if (!p[1])
				return WORD_UNKNOWN;
			w->text[n++] = p[1];
			p += 2;
			name_so_far = false;
			continue;
		}
		if (c == '\'') {
			const char *q = strchr(p + 1, '\'');

			if (!q || n + (size_t)(q - p) + 1 >= WORD_MAX)
				return WORD_UNKNOWN;
			memcpy(w->text + n, p + 1, (size_t)(q - p - 1));
			n += (size_t)(q - p - 1);
			p = q + 1;
			name_so_far = false;
			continue;
		}
		if (c == '"') {
			for (p++; *p != '"'; p++) {
				if (!*p || *p == '$' || *p == '`' || n + 2 >= WORD_MAX)
					return WORD_UNKNOWN;
				if (*p == '\\' && p[1] && strchr("$`\"\\", p[1]))
					p++;
				w->text[n++] = *p;
			}
			p++;
			name_so_far = false;
			continue;
		}
		if (c == '=' && name_so_far && n > 0)
			w->assignment = true;
		name_so_far = name_so_far && !w->assignment && name_char(c, n == 0);
		w->text[n++] = c;
		p++;
	}
	w->text[n] = '\0';
	*s = p;
	return WORD_OK;
}

/* dash's and bash's builtins that run without a program of that name */
static bool builtin(const char *name)
{
	static const char *const names[] = {
	    ".",        ":",     "[",       "alias",  "bg",     "break", "cd",   "command",
	    "continue", "echo",  "eval",    "exit",   "export", "false", "fg",   "getopts",
	    "hash",     "jobs",  "kill",    "local",  "printf", "pwd",   "read", "readonly",
	    "return",   "set",   "shift",   "test",   "times",  "trap",  "true", "type",
	    "ulimit",   "umask", "unalias", "unset",  "wait",   "if",    "for",  "while",
	    "until",    "case",  "!",       "source",
	};

	for (size_t i = 0; i < sizeof names / sizeof *names; i++)
		if (strcmp(name, names[i]) == 0)
			return true;
	return false;
}

static bool executable_file(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* A program named with a '/': what is wrong with it, or 0. */
static int check_path(const char *path, char *why, size_t whylen)
{
	struct stat st;

	if (stat(path, &st) != 0) {
		snprintf(why, whylen, "%s: %s", path,
		         errno == ENOENT ? "no such file" : strerror(errno));
		return -1;
	}
	if (S_ISDIR(st.st_mode)) {
		snprintf(why, whylen, "%s is a directory", path);
		return -1;
	}
	if (access(path, X_OK) != 0) {
		snprintf(why, whylen,
		         "%s is not executable (chmod +x it, or name its interpreter first: "
		         "python3 %s)",
		         path, path);
		return -1;
	}
	return 0;
}

/* A program named without a '/', as sh finds it. */
static int check_in_path(const char *name, char *why, size_t whylen)
{
	const char *path = getenv("PATH");

	if (builtin(name))
		return 0;
	if (!path)
		path = "/usr/local/bin:/usr/bin:/bin";
	for (const char *p = path;; p++) {
		const char *end = strchr(p, ':');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		char full[WORD_MAX + 4096];

		/* an empty entry is the current directory */
		snprintf(full, sizeof full, "%.*s%s%s", (int)len, len ? p : ".", "/", name);
		if (executable_file(full))
			return 0;
		if (!end)
			break;
		p = end;
	}
	snprintf(why, whylen, "%s: not found in PATH (%s)", name, path);
	return -1;
}

/* Interpreters whose first argument that is not an option is the script
 * they run. */
static bool interpreter(const char *program)
{
	const char *base = strrchr(program, '/');
	static const char *const names[] = {"bash", "sh",   "dash",   "perl",
	                                    "ruby", "node", "Rscript"};

	base = base ? base + 1 : program;
	if (strncmp(base, "python", 6) == 0)
		return strspn(base + 6, "0123456789.") == strlen(base + 6);
	for (size_t i = 0; i < sizeof names / sizeof *names; i++)
		if (strcmp(base, names[i]) == 0)
			return true;
	return false;
}

static int check_script(const char **s, const char *program, char *why, size_t whylen)
{
	struct word w;
	struct stat st;

	for (;;) {
		if (next_word(s, &w) != WORD_OK)
			return 0;
		if (w.text[0] != '-')
			break;
		/* flags without an argument (python -u, bash -e); any other
		 * option (-c CODE, -m MODULE, -W ARG...) leaves nothing to check */
		if (!w.text[1] || strspn(w.text + 1, "uBEsSqbdvxn") != strlen(w.text + 1))
			return 0;
	}
	if (stat(w.text, &st) != 0)
		snprintf(why, whylen, "%s: %s (the script %s is to run)", w.text,
		         errno == ENOENT ? "no such file" : strerror(errno), program);
	else if (S_ISDIR(st.st_mode))
		snprintf(why, whylen, "%s is a directory (the script %s is to run)", w.text,
		         program);
	else
		return 0;
	return -1;
}

int rl_reward_program_check(const char *command, char *why, size_t whylen)
{
	struct word w;
	const char *s = command;
	int got;

	while ((got = next_word(&s, &w)) == WORD_OK &&
	       (w.assignment || strcmp(w.text, "exec") == 0))
		;
	if (got == WORD_END && s == command) {
		snprintf(why, whylen, "the command is empty");
		return -1;
	}
	if (got != WORD_OK)
		return 0;
	if (strchr(w.text, '/') ? check_path(w.text, why, whylen)
	                        : check_in_path(w.text, why, whylen))
		return -1;
	if (interpreter(w.text)) {
		char program[WORD_MAX];

		snprintf(program, sizeof program, "%s", w.text);
		return check_script(&s, program, why, whylen);
	}
	return 0;
}
