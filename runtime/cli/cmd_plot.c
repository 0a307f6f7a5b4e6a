#define _GNU_SOURCE
/* rlrun plot: reward (or an SFT run's loss) and step time of a run from its
 * metrics.jsonl, in the terminal or as a PNG. gnuplot draws; we only write its script, so that a
 * node without a display (gnuplot-nox) is enough and rlrun links nothing
 * graphical. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/cli/commands.h"
#include "runtime/cli/metrics_read.h"

extern char **environ;

static const char usage[] = "usage: rlrun plot LOG_DIR [-o FILE.png]\n";

#define NOT_FOUND "gnuplot not found on PATH (Debian: apt-get install gnuplot-nox)"

/* The step-time parts, bottom of the stack first; data columns 5.. */
struct timer {
	const char *name, *color;
	size_t off; /* in struct rl_metric_row */
};
#define ROW(f) offsetof(struct rl_metric_row, f)
static const struct timer grpo_timers[] = {
    {"generation", "#1f77b4", ROW(generation)},
    {"reward_calculation", "#ff7f0e", ROW(reward_calculation)},
    {"policy_and_reference_logprobs", "#2ca02c", ROW(policy_and_reference_logprobs)},
    {"policy_training", "#d62728", ROW(policy_training)},
    {"refit", "#9467bd", ROW(refit)},
    {"checkpointing", "#8c564b", ROW(checkpointing)},
};
/* rlrun sft's: no generation, reward or refit */
static const struct timer sft_timers[] = {
    {"data_processing", "#1f77b4", ROW(data_processing)},
    {"policy_training", "#d62728", ROW(policy_training)},
    {"checkpointing", "#8c564b", ROW(checkpointing)},
};
#define FIRST_TIMER_COL 5

/* What a run's plots show: GRPO's reward, or SFT's loss */
struct what {
	const struct timer *timers;
	int n_timers;
	const char *title, *ylabel, *series, *val;
	bool band; /* reward_std around it */
};
static const struct what grpo_what = {grpo_timers,  6,   "reward per step", "reward", "reward_mean",
                                      "val_reward", true};
static const struct what sft_what = {sft_timers, 3,    "loss per step", "loss", "loss",
                                     "val_loss", false};

static double timer_of(const struct rl_metric_row *r, const struct timer *t)
{
	return *(const double *)((const char *)r + t->off);
}

/* A gnuplot single-quoted string: nothing is special but the quote itself,
 * doubled; a newline would end the command, so control characters become '?'. */
static void gp_quote(FILE *s, const char *text)
{
	fputc('\'', s);
	for (const char *p = text; *p; p++) {
		if (*p == '\'')
			fputs("''", s);
		else
			fputc((unsigned char)*p < 0x20 ? '?' : *p, s);
	}
	fputc('\'', s);
}

static int env_int(const char *name, int lo, int hi)
{
	const char *v = getenv(name);
	char *end;
	long x;

	if (!v || !*v)
		return 0;
	x = strtol(v, &end, 10);
	return *end || x < lo || x > hi ? 0 : (int)x;
}

/* $COLUMNS and $LINES, which shells set but seldom export, so then the
 * terminal itself, then 100x30. */
static void terminal_size(int *w, int *h)
{
	struct winsize ws;

	*w = env_int("COLUMNS", 40, 1000);
	*h = env_int("LINES", 12, 1000);
	if ((!*w || !*h) && isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0) {
		if (!*w && ws.ws_col >= 40)
			*w = ws.ws_col;
		if (!*h && ws.ws_row >= 12)
			*h = ws.ws_row;
	}
	*w = *w ? *w : 100;
	*h = *h ? *h : 30;
}

static void write_data(FILE *s, const struct rl_metric_row *r, size_t n, const struct what *w)
{
	size_t nval = 0;

	fprintf(s, "$data << EOD\n# step %s reward_std total_step_time", w->series);
	for (int t = 0; t < w->n_timers; t++)
		fprintf(s, " %s", w->timers[t].name);
	fputc('\n', s);
	for (size_t i = 0; i < n; i++) {
		fprintf(s, "%lld %.10g %.10g %.10g", (long long)r[i].step, r[i].reward_mean,
		        r[i].reward_std, r[i].total_step_time);
		for (int t = 0; t < w->n_timers; t++)
			fprintf(s, " %.10g", timer_of(&r[i], &w->timers[t]));
		fputc('\n', s);
		nval += r[i].has_val;
	}
	fputs("EOD\n", s);
	if (!nval)
		return;
	fprintf(s, "$val << EOD\n# step %s\n", w->val);
	for (size_t i = 0; i < n; i++)
		if (r[i].has_val)
			fprintf(s, "%lld %.10g\n", (long long)r[i].step, r[i].val_reward);
	fputs("EOD\n", s);
}

/* The sum of the first K timer columns, as a gnuplot `using` expression. */
static void stack_expr(FILE *s, int k)
{
	fputc('(', s);
	for (int t = 0; t < k; t++)
		fprintf(s, "%s$%d", t ? "+" : "", FIRST_TIMER_COL + t);
	fputc(')', s);
}

/* Starts the next element of a plot command: "plot " or a continuation. */
static void next(FILE *s, int *count)
{
	fputs((*count)++ ? ", \\\n     " : "plot ", s);
}

/* Beyond this many steps bars and points blur into each other. */
#define DENSE_STEPS 100

/* A constant series is an empty y range, which gnuplot widens with a
 * warning; widened here instead. Seconds start at 0. */
static void y_range(FILE *s, double lo, double hi, int from_zero)
{
	if (from_zero)
		fputs(hi > 0 ? "set yrange [0:*]\n" : "set yrange [0:1]\n", s);
	else if (hi > lo)
		fputs("set yrange [*:*]\n", s);
	else if (hi == lo)
		fprintf(s, "set yrange [%.10g:%.10g]\n", lo - 0.5, lo + 0.5);
	else /* no finite value at all */
		fputs("set yrange [-1:1]\n", s);
}

static void write_plots(FILE *s, const struct rl_metric_row *r, size_t n, int png,
                        const struct what *w)
{
	int64_t first = r[0].step, last = r[n - 1].step;
	int has_val = 0, has_total = 0, count = 0, dense = n > DENSE_STEPS;
	double lo = INFINITY, hi = -INFINITY, tmax = 0; /* fmin, fmax skip NaN */
	const char *with = dense ? "lines" : "linespoints";

	for (size_t i = 0; i < n; i++) {
		double band = png && w->band ? r[i].reward_std : 0, sum = 0;
		for (int t = 0; t < w->n_timers; t++)
			sum += timer_of(&r[i], &w->timers[t]);
		has_val |= r[i].has_val;
		has_total |= r[i].total_step_time > 0;
		lo = fmin(lo, r[i].reward_mean - band);
		hi = fmax(hi, r[i].reward_mean + band);
		if (r[i].has_val) {
			lo = fmin(lo, r[i].val_reward);
			hi = fmax(hi, r[i].val_reward);
		}
		tmax = fmax(tmax, fmax(sum, r[i].total_step_time));
	}
	/* half a step of margin: the first and last bars whole, and never an
	 * empty range (one step), which gnuplot warns about */
	fprintf(s, "set xrange [%lld-0.5:%lld+0.5]\n", (long long)first, (long long)last);
	if (last - first < 10)
		fputs("set xtics 1\n", s);
	/* a grid in the dumb terminal is more dots than data */
	if (png)
		fputs("set grid\n", s);
	fputs("set xlabel 'step'\n", s);
	fputs(png ? "set key outside right top\n" : "set key below\n", s);

	fprintf(s, "set title '%s'\nset ylabel '%s'\n", w->title, w->ylabel);
	y_range(s, lo, hi, 0);
	if (png && w->band) {
		next(s, &count);
		fputs("$data using 1:($2-$3):($2+$3) with filledcurves fs transparent solid 0.25 "
		      "lc rgb '#1f77b4' title 'reward_mean +/- reward_std'",
		      s);
	}
	next(s, &count);
	fprintf(s, "$data using 1:2 with %s lc rgb '#1f77b4' %stitle '%s'", with,
	        dense ? "" : "pt 7 ps 0.6 ", w->series);
	if (has_val) {
		next(s, &count);
		fprintf(s, "$val using 1:2 with points lc rgb '#000000' pt 9 ps 1.5 title '%s'",
		        w->val);
	}

	count = 0;
	fputs("\nset title 'step time breakdown'\nset ylabel 'seconds'\n", s);
	y_range(s, 0, tmax, 1);
	for (int i = 0; i < w->n_timers; i++) {
		int k = png ? w->n_timers - i : i + 1;
		/* PNG: stacked bars (areas when dense), the tallest sum first and each
		 * shorter one drawn over it, so that the legend reads top to bottom
		 * like the stack. dumb fills every area with the same character, so
		 * there the top edge of each layer reads better. */
		next(s, &count);
		fputs("$data using 1:", s);
		stack_expr(s, k);
		if (png)
			fprintf(s, " with %s fs solid 0.9 noborder lc rgb '%s' title '%s'",
			        dense ? "filledcurves y=0" : "boxes", w->timers[k - 1].color,
			        w->timers[k - 1].name);
		else
			fprintf(s, " with %s title '%s%s'", with, k > 1 ? "+ " : "",
			        w->timers[k - 1].name);
	}
	if (has_total) {
		next(s, &count);
		fprintf(s, "$data using 1:4 with %s %s%stitle 'total_step_time'", with,
		        png ? "lc rgb '#000000' " : "", png && !dense ? "pt 1 " : "");
	}
	fputc('\n', s);
}

/* The whole gnuplot script, malloc'd into *text. */
static int build_script(const char *dir, const struct rl_metric_row *r, size_t n, int png,
                        char **text, size_t *len)
{
	FILE *s = open_memstream(text, len);
	/* SFT's run: every line is SFT's; a line of each kind is GRPO's */
	bool supervised = true;
	for (size_t i = 0; i < n; i++)
		supervised &= r[i].supervised;
	const struct what *w = supervised ? &sft_what : &grpo_what;

	if (!s)
		return -1;
	write_data(s, r, n, w);
	if (png) {
		fputs("if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
		      "  set terminal pngcairo size 1200,900 noenhanced\n"
		      "} else {\n"
		      "  set terminal png size 1200,900 noenhanced\n"
		      "}\n",
		      s);
		/* the same margins for both plots, so that their steps line up;
		 * bars in steps, since a relative width needs two of them */
		fputs("set lmargin at screen 0.08\nset rmargin at screen 0.72\n"
		      "set boxwidth 0.8 absolute\n",
		      s);
		fputs("set multiplot layout 2,1 title ", s);
		gp_quote(s, dir);
		fputc('\n', s);
	} else {
		int cols, rows;
		terminal_size(&cols, &rows);
		fprintf(s, "set terminal dumb feed size %d,%d\nset termoption noenhanced\n", cols,
		        rows);
	}
	write_plots(s, r, n, png, w);
	if (png)
		fputs("unset multiplot\n", s);
	return fclose(s) ? -1 : 0;
}

/* Runs gnuplot with SCRIPT on its stdin and OUT_FD (or ours) as its stdout.
 * Its stderr is ours: its own messages say best what went wrong. */
static int run_gnuplot(const char *script, size_t len, int out_fd)
{
	char *const argv[] = {"gnuplot", "-d", NULL}; /* -d: no ~/.gnuplot */
	posix_spawn_file_actions_t fa;
	struct sigaction ign = {.sa_handler = SIG_IGN}, old;
	int fds[2], status, e;
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC)) {
		fprintf(stderr, "rlrun plot: pipe: %s\n", strerror(errno));
		return -1;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fds[0], STDIN_FILENO);
	if (out_fd >= 0)
		posix_spawn_file_actions_adddup2(&fa, out_fd, STDOUT_FILENO);
	fflush(stdout);
	e = posix_spawnp(&pid, "gnuplot", &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(fds[0]);
	if (e) {
		close(fds[1]);
		if (e == ENOENT)
			fputs("rlrun plot: " NOT_FOUND "\n", stderr);
		else
			fprintf(stderr, "rlrun plot: cannot run gnuplot: %s\n", strerror(e));
		return -1;
	}
	/* gnuplot may exit before reading it all; its status says why, not EPIPE */
	sigaction(SIGPIPE, &ign, &old);
	for (size_t off = 0; off < len;) {
		ssize_t w = write(fds[1], script + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			break;
		off += (size_t)w;
	}
	close(fds[1]);
	sigaction(SIGPIPE, &old, NULL);
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			fprintf(stderr, "rlrun plot: waitpid: %s\n", strerror(errno));
			return -1;
		}
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
		fputs("rlrun plot: " NOT_FOUND "\n", stderr);
	else if (WIFEXITED(status))
		fprintf(stderr, "rlrun plot: gnuplot failed (exit status %d)\n",
		        WEXITSTATUS(status));
	else
		fprintf(stderr, "rlrun plot: gnuplot killed by signal %d\n", WTERMSIG(status));
	return -1;
}

/* FILE.png through a temporary next to it: a failed plot leaves an earlier
 * FILE.png as it was. */
static int plot_png(const char *out, const char *script, size_t len)
{
	size_t tlen = strlen(out) + sizeof ".XXXXXX";
	char *tmp = malloc(tlen);
	mode_t mask = umask(0);
	struct stat st;
	int fd, rc = -1;

	umask(mask);
	if (!tmp) {
		fputs("rlrun plot: out of memory\n", stderr);
		return -1;
	}
	snprintf(tmp, tlen, "%s.XXXXXX", out);
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "rlrun plot: %s: %s\n", out, strerror(errno));
		free(tmp);
		return -1;
	}
	fchmod(fd, 0666 & ~mask);
	if (run_gnuplot(script, len, fd))
		goto out;
	if (fstat(fd, &st) || st.st_size == 0) {
		fprintf(stderr, "rlrun plot: %s: gnuplot wrote nothing\n", out);
		goto out;
	}
	if (rename(tmp, out)) {
		fprintf(stderr, "rlrun plot: %s: %s\n", out, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	close(fd);
	if (rc)
		unlink(tmp);
	free(tmp);
	return rc;
}

static int has_png_suffix(const char *path)
{
	size_t n = strlen(path);

	return n > 4 && strcasecmp(path + n - 4, ".png") == 0;
}

int rl_cmd_plot(int argc, char **argv)
{
	static const struct option opts[] = {{"output", required_argument, NULL, 'o'},
	                                     {"help", no_argument, NULL, 'h'},
	                                     {NULL, 0, NULL, 0}};
	const char *out = NULL, *dir;
	struct rl_metric_row *rows = NULL;
	char *path = NULL, *script = NULL, err[1024];
	size_t n = 0, len = 0;
	struct stat st;
	int c, rc = RL_EXIT_FAIL;

	optind = 1;
	while ((c = getopt_long(argc, argv, "ho:", opts, NULL)) != -1) {
		switch (c) {
		case 'o':
			out = optarg;
			break;
		case 'h':
			fputs(usage, stdout);
			return RL_EXIT_OK;
		default:
			fputs(usage, stderr);
			return RL_EXIT_USAGE;
		}
	}
	if (optind != argc - 1) {
		fputs(usage, stderr);
		return RL_EXIT_USAGE;
	}
	dir = argv[optind];
	if (out && !has_png_suffix(out)) {
		fprintf(stderr,
		        "rlrun plot: -o %s: only PNG is written; the name must end in .png\n", out);
		return RL_EXIT_USAGE;
	}
	if (stat(dir, &st) || !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "rlrun plot: %s: %s\n", dir,
		        access(dir, F_OK) ? strerror(errno) : "not a directory");
		return RL_EXIT_FAIL;
	}
	if (asprintf(&path, "%s/metrics.jsonl", dir) < 0) {
		path = NULL;
		fputs("rlrun plot: out of memory\n", stderr);
		goto out;
	}
	if (rl_metrics_read(path, &rows, &n, err, sizeof err)) {
		fprintf(stderr, "rlrun plot: %s\n", err);
		goto out;
	}
	if (build_script(dir, rows, n, out != NULL, &script, &len)) {
		fprintf(stderr, "rlrun plot: out of memory\n");
		goto out;
	}
	if (out ? plot_png(out, script, len) : run_gnuplot(script, len, -1))
		goto out;
	if (out)
		fprintf(stderr, "rlrun plot: wrote %s (%zu step%s)\n", out, n, n == 1 ? "" : "s");
	rc = RL_EXIT_OK;
out:
	free(script);
	free(rows);
	free(path);
	return rc;
}
