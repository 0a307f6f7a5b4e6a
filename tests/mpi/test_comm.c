/* The comm layer on real MPI ranks: every collective over the world and
 * over the layout's groups, checked against values worked out in closed
 * form from the ranks that took part (not against another collective).
 *   test_comm TP PP CP        run the checks for that layout
 *   test_comm --staged TP PP CP  the same checks through each group's
 *                             staged device face (runtime/comm/comm_staged.c),
 *                             its copies plain memcpy, so that every
 *                             collective's staging (extents, in place) is
 *                             held to the same closed forms
 *   test_comm --fenced MODE   the fenced backend's rules on two staged
 *                             groups: "ok" (device collectives on fenced
 *                             memory give the sums), "device-host" (a device
 *                             collective given host memory) and "host-fenced"
 *                             (a host collective given fenced memory) must
 *                             end the run by the watchdog (status 3), named;
 *                             a breach that goes through exits 2
 *   test_comm --die RANK S    rank RANK kills itself before an all-reduce;
 *                             the others must be stopped by the watchdog
 *                             (timeout S seconds)
 *   test_comm --stop RANK S WHERE  rank RANK stops itself (SIGSTOP) before
 *                             an all-reduce (WHERE collective) or before a
 *                             communicator split, a blocking call of the
 *                             setup (WHERE split): every other rank must
 *                             name it and exit with status 3 within S + 10
 *                             seconds, whatever its main thread is in
 * Run with mpiexec -n N or srun --mpi=pmi2 -n N. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/fenced.h"
#include "runtime/comm/dist.h"

static int checks, failures;

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		checks++;                                                                          \
		if (!(cond)) {                                                                     \
			failures++;                                                                \
			fprintf(stderr, "test_comm: rank %d: ", me);                               \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
		}                                                                                  \
	} while (0)

static int me;

/* what world rank w contributes at element i: distinct per rank and index */
static double contrib(int w, size_t i)
{
	return (double)(w + 1) * 1000.0 + (double)i * 0.5;
}

/* all_to_all_v's traffic, member s to member d of an n-member group:
 * uneven, empty in both directions for some pairs (self included), and
 * one block large enough to need a rendezvous. The last member of a group
 * of several sends nothing at all. */
static size_t v_count(int n, int s, int d)
{
	if (n > 1 && s == n - 1)
		return 0;
	if (s == 0 && d == 1)
		return 40000;
	return (s + 2 * d) % 3 == 0 ? 0 : 1 + (size_t)(7 * s + 13 * d) % 29;
}

/* element i of what world rank ws sends world rank wd: exact in I32 and
 * F32 (below 2^24 for up to 8 ranks and i < 50000) */
static int32_t v_value(int ws, int wd, size_t i)
{
	return ws * 1000000 + wd * 50000 + (int32_t)i;
}

static void check_all_to_all_v(struct rl_comm *c, enum rl_comm_dtype t, bool empty)
{
	int n = rl_comm_size(c), r = rl_comm_rank(c);
	const char *name = rl_comm_name(c), *tn = t == RL_COMM_F32 ? "f32" : "i32";
	size_t sc[8], rc[8], ns = 0, nr = 0;
	int64_t sc64[8], rc64[8];

	for (int k = 0; k < n; k++) {
		sc64[k] = empty ? 0 : (int64_t)v_count(n, r, k);
		sc[k] = (size_t)sc64[k];
		ns += sc[k];
	}
	/* what a caller does first: tell every peer how much is coming */
	rl_comm_all_to_all(c, sc64, rc64, 1, RL_COMM_I64, "test a2av counts");
	for (int k = 0; k < n; k++) {
		CHECK(rc64[k] == (empty ? 0 : (int64_t)v_count(n, k, r)),
		      "%s all_to_all_v counts from %d: %lld", name, k, (long long)rc64[k]);
		rc[k] = (size_t)rc64[k];
		nr += rc[k];
	}
	/* an empty side is NULL, as malloc(0) may give; both types are 4 B */
	void *sb = ns ? malloc(ns * 4) : NULL, *rb = nr ? malloc(nr * 4) : NULL;
	CHECK((sb || !ns) && (rb || !nr), "%s all_to_all_v buffers", name);
	if ((!sb && ns) || (!rb && nr)) {
		free(sb);
		free(rb);
		return;
	}
	size_t at = 0;
	for (int k = 0; k < n; k++)
		for (size_t i = 0; i < sc[k]; i++, at++) {
			int32_t v = v_value(me, rl_comm_world_rank(c, k), i);
			if (t == RL_COMM_F32)
				((float *)sb)[at] = -0.5f * (float)v;
			else
				((int32_t *)sb)[at] = v;
		}
	if (nr)
		memset(rb, 0xff, nr * 4);
	rl_comm_all_to_all_v(c, sb, sc, rb, rc, t, "test a2av");
	int bad = 0;
	at = 0;
	for (int k = 0; k < n; k++)
		for (size_t i = 0; i < rc[k]; i++, at++) {
			int32_t v = v_value(rl_comm_world_rank(c, k), me, i);
			if (t == RL_COMM_F32)
				bad += ((const float *)rb)[at] != -0.5f * (float)v;
			else
				bad += ((const int32_t *)rb)[at] != v;
		}
	CHECK(bad == 0, "%s all_to_all_v %s%s: %d of %zu elements wrong", name, tn,
	      empty ? " (empty)" : "", bad, nr);
	free(sb);
	free(rb);
}

static void check_group(struct rl_comm *c)
{
	int n = rl_comm_size(c), r = rl_comm_rank(c);
	const char *name = rl_comm_name(c);
	enum { N = 37 };
	double buf[N * 8], want, out[N * 8];
	int32_t ib[4];

	if (n > 8)
		return;
	CHECK(rl_comm_world_rank(c, r) == me, "%s: member %d is not me", name, r);
	/* all_reduce sum / max / min over doubles */
	for (size_t i = 0; i < N; i++)
		buf[i] = contrib(me, i);
	rl_comm_all_reduce(c, buf, N, RL_COMM_F64, RL_COMM_SUM, "test sum");
	for (size_t i = 0; i < N; i++) {
		want = 0;
		for (int k = 0; k < n; k++)
			want += contrib(rl_comm_world_rank(c, k), i);
		CHECK(buf[i] == want, "%s all_reduce sum [%zu] %g != %g", name, i, buf[i], want);
	}
	ib[0] = me;
	ib[1] = -me;
	rl_comm_all_reduce(c, ib, 1, RL_COMM_I32, RL_COMM_MAX, "test max");
	rl_comm_all_reduce(c, ib + 1, 1, RL_COMM_I32, RL_COMM_MIN, "test min");
	CHECK(ib[0] == rl_comm_world_rank(c, n - 1), "%s max %d", name, ib[0]);
	CHECK(ib[1] == -rl_comm_world_rank(c, n - 1), "%s min %d", name, ib[1]);
	/* reduce_scatter: block b of the result is the sum of everyone's block b */
	for (size_t i = 0; i < (size_t)N * n; i++)
		buf[i] = contrib(me, i);
	rl_comm_reduce_scatter(c, buf, out, N, RL_COMM_F64, RL_COMM_SUM, "test rs");
	for (size_t i = 0; i < N; i++) {
		want = 0;
		for (int k = 0; k < n; k++)
			want += contrib(rl_comm_world_rank(c, k), (size_t)r * N + i);
		CHECK(out[i] == want, "%s reduce_scatter [%zu] %g != %g", name, i, out[i], want);
	}
	/* all_gather, out of place and in place */
	for (size_t i = 0; i < N; i++)
		buf[i] = contrib(me, i);
	rl_comm_all_gather(c, buf, out, N, RL_COMM_F64, "test ag");
	for (int k = 0; k < n; k++)
		for (size_t i = 0; i < N; i++)
			CHECK(out[(size_t)k * N + i] == contrib(rl_comm_world_rank(c, k), i),
			      "%s all_gather block %d [%zu]", name, k, i);
	memset(out, 0, sizeof out);
	for (size_t i = 0; i < N; i++)
		out[(size_t)r * N + i] = contrib(me, i);
	rl_comm_all_gather(c, out + (size_t)r * N, out, N, RL_COMM_F64, "test ag in place");
	for (int k = 0; k < n; k++)
		CHECK(out[(size_t)k * N + 3] == contrib(rl_comm_world_rank(c, k), 3),
		      "%s all_gather in place block %d", name, k);
	/* broadcast from the last member */
	for (size_t i = 0; i < N; i++)
		buf[i] = contrib(me, i);
	rl_comm_broadcast(c, buf, N, RL_COMM_F64, n - 1, "test bcast");
	CHECK(buf[5] == contrib(rl_comm_world_rank(c, n - 1), 5), "%s broadcast", name);
	/* all_to_all: block k of what I get is what member k meant for me */
	for (int k = 0; k < n; k++)
		for (size_t i = 0; i < N; i++)
			buf[(size_t)k * N + i] = contrib(me, i) + k;
	rl_comm_all_to_all(c, buf, out, N, RL_COMM_F64, "test a2a");
	for (int k = 0; k < n; k++)
		CHECK(out[(size_t)k * N + 7] == contrib(rl_comm_world_rank(c, k), 7) + r,
		      "%s all_to_all block %d", name, k);
	check_all_to_all_v(c, RL_COMM_I32, false);
	check_all_to_all_v(c, RL_COMM_F32, false);
	check_all_to_all_v(c, RL_COMM_F32, true);
	/* a ring of send/recv: even members send first, so it cannot deadlock
	 * even with rendezvous sends */
	if (n > 1) {
		int next = (r + 1) % n, prev = (r + n - 1) % n;
		double mine = contrib(me, 11), got = 0;

		if (r % 2 == 0) {
			rl_comm_send(c, &mine, 1, RL_COMM_F64, next, "test send");
			rl_comm_recv(c, &got, 1, RL_COMM_F64, prev, "test recv");
		} else {
			rl_comm_recv(c, &got, 1, RL_COMM_F64, prev, "test recv");
			rl_comm_send(c, &mine, 1, RL_COMM_F64, next, "test send");
		}
		CHECK(got == contrib(rl_comm_world_rank(c, prev), 11), "%s send/recv", name);

		/* sendrecv: member k sends big + k values to next while it
		 * receives from prev, each of them large enough to need a
		 * rendezvous, which two plain blocking sends would deadlock on */
		size_t big = 1 << 16, out_n = big + (size_t)r, in_n = big + (size_t)prev;
		double *tx = malloc(out_n * sizeof *tx), *rx = calloc(in_n, sizeof *rx);
		CHECK(tx && rx, "%s sendrecv buffers", name);
		if (tx && rx) {
			int from = rl_comm_world_rank(c, prev);

			for (size_t i = 0; i < out_n; i++)
				tx[i] = contrib(me, i);
			rl_comm_sendrecv(c, tx, out_n, next, rx, in_n, prev, RL_COMM_F64,
			                 "test sendrecv");
			CHECK(rx[0] == contrib(from, 0) && rx[in_n - 1] == contrib(from, in_n - 1),
			      "%s sendrecv", name);
		}
		free(tx);
		free(rx);
	}
	rl_comm_barrier(c, "test barrier");
}

/* The groups hold exactly the ranks the layout's table names. */
static void check_membership(const struct rl_dist *d)
{
	static const char *const masks[RL_N_GROUPS] = {
	    [RL_G_TP] = "tp",       [RL_G_CP] = "cp",       [RL_G_DP] = "dp",    [RL_G_PP] = "pp",
	    [RL_G_DP_CP] = "dp-cp", [RL_G_TP_DP] = "tp-dp", [RL_G_MP] = "tp-pp",
	};
	int members[64];

	for (int g = 0; g < RL_N_GROUPS; g++) {
		if (!masks[g])
			continue;
		int n = rl_layout_group(&d->layout, masks[g], 0, me, members, 64);
		CHECK(n == rl_comm_size(d->g[g]), "%s: size %d, layout says %d", rl_group_name(g),
		      rl_comm_size(d->g[g]), n);
		for (int i = 0; i < n && n == rl_comm_size(d->g[g]); i++)
			CHECK(rl_comm_world_rank(d->g[g], i) == members[i], "%s member %d",
			      rl_group_name(g), i);
	}
	int pp = d->layout.size[RL_AXIS_PP], stage = d->coords.rank[RL_AXIS_PP];
	struct rl_comm *e = d->g[RL_G_EMBEDDING];
	if (stage == 0 || stage == pp - 1) {
		CHECK(e && rl_comm_size(e) == (pp > 1 ? 2 : 1), "embedding group size");
		if (e && pp > 1)
			CHECK(rl_comm_world_rank(e, 1) - rl_comm_world_rank(e, 0) ==
			          d->size / pp * (pp - 1),
			      "embedding group joins the two ends of one pipeline");
	} else {
		CHECK(!e, "a middle stage is in an embedding group");
	}
}

static int copy_to_host(void *host, const void *src, size_t bytes, void *stream)
{
	(void)stream;
	memcpy(host, src, bytes);
	return 0;
}

static int copy_from_host(void *dst, const void *host, size_t bytes, void *stream)
{
	(void)stream;
	memcpy(dst, host, bytes);
	return 0;
}

static const struct rl_comm_stage memcpy_stage = {copy_to_host, copy_from_host, NULL, NULL};

/* The fenced table's rules through the staged transport: what each mode
 * must do is in the usage above. */
static int fenced(struct rl_dist *d, const char *mode)
{
	static struct rl_comm_stage stage;
	struct rl_comm *w = d->g[RL_G_WORLD];
	char err[512];
	enum { N = 1000 };

	stage = (struct rl_comm_stage){rl_ops_fenced.to_host, rl_ops_fenced.from_host, NULL, NULL};
	if (rl_dist_connect_devices(d, RL_COMM_STAGED, &stage, err, sizeof err)) {
		fprintf(stderr, "test_comm: %s\n", err);
		return 1;
	}
	float host[N], *dev = rl_ops_fenced.alloc(N * sizeof *dev);
	for (int i = 0; i < N; i++)
		host[i] = (float)(me + 1) * (float)i;
	rl_ops_fenced.from_host(dev, host, sizeof host, NULL);
	if (strcmp(mode, "device-host") == 0)
		rl_comm_all_reduce(rl_comm_device(w), host, N, RL_COMM_F32, RL_COMM_SUM,
		                   "a device sum of host memory");
	else if (strcmp(mode, "host-fenced") == 0)
		rl_comm_all_reduce(w, dev, N, RL_COMM_F32, RL_COMM_SUM,
		                   "a host sum of device memory");
	if (strcmp(mode, "ok") != 0) {
		/* the status the test tells from the watchdog's */
		fprintf(stderr, "test_comm: rank %d: mode %s did not end the run\n", me, mode);
		exit(2);
	}
	rl_comm_all_reduce(rl_comm_device(w), dev, N, RL_COMM_F32, RL_COMM_SUM, "a device sum");
	rl_ops_fenced.to_host(host, dev, sizeof host, NULL);
	/* sum over ranks of (r + 1) i: exact in fp32 for these sizes */
	float ranks = (float)(d->size * (d->size + 1) / 2);
	for (int i = 0; i < N; i++)
		CHECK(host[i] == ranks * (float)i, "fenced device sum at %d: %g", i, host[i]);
	rl_ops_fenced.release(dev);
	return 0;
}

/* Rank VICTIM takes SIG after a warm-up all-reduce; the others go on to an
 * all-reduce (or a split) it never joins. The watchdog must end them all,
 * naming it: returning here is the failure. */
static int lose_a_rank(int world, int sig, int victim, double timeout, bool split)
{
	struct rl_layout l;
	struct rl_dist d;
	struct rl_comm *half = NULL;
	char err[512];

	if (rl_layout_init(&l, world, 1, 1, 1, 1, 1, err, sizeof err) ||
	    rl_dist_init(&d, &l, NULL, -1, timeout, err, sizeof err)) {
		fprintf(stderr, "test_comm: %s\n", err);
		return 1;
	}
	me = d.rank;
	double x = 1;
	rl_comm_all_reduce(d.g[RL_G_WORLD], &x, 1, RL_COMM_F64, RL_COMM_SUM, "warm-up");
	if (me == victim)
		raise(sig);
	if (split)
		rl_comm_split(d.g[RL_G_WORLD], me % 2, me, "half", &half, err, sizeof err);
	else
		rl_comm_all_reduce(d.g[RL_G_WORLD], &x, 1, RL_COMM_F64, RL_COMM_SUM,
		                   "the one the victim never joins");
	fprintf(stderr, "test_comm: rank %d: the %s completed without rank %d\n", me,
	        split ? "split" : "all-reduce", victim);
	return 1;
}

int main(int argc, char **argv)
{
	struct rl_layout l;
	struct rl_dist d;
	char err[512];
	int world = 0;
	const char *v = getenv("PMI_SIZE");

	if (!v)
		v = getenv("SLURM_NTASKS");
	world = v ? atoi(v) : 1;
	if (argc == 4 && strcmp(argv[1], "--die") == 0)
		return lose_a_rank(world, SIGKILL, atoi(argv[2]), atof(argv[3]), false);
	if (argc == 5 && strcmp(argv[1], "--stop") == 0)
		return lose_a_rank(world, SIGSTOP, atoi(argv[2]), atof(argv[3]),
		                   strcmp(argv[4], "split") == 0);
	if (argc == 3 && strcmp(argv[1], "--fenced") == 0) {
		if (rl_layout_init(&l, world, 1, 1, 1, 1, 1, err, sizeof err) ||
		    rl_dist_init(&d, &l, NULL, -1, 60, err, sizeof err)) {
			fprintf(stderr, "test_comm: %s\n", err);
			return 1;
		}
		me = d.rank;
		if (fenced(&d, argv[2]))
			return 1;
		rl_dist_finalize(&d);
		if (me == 0 || failures)
			printf("test_comm: rank %d: %d checks, %d failed\n", me, checks, failures);
		return failures ? 1 : 0;
	}
	bool staged = argc == 5 && strcmp(argv[1], "--staged") == 0;
	if (argc != 4 && !staged) {
		fprintf(stderr, "usage: test_comm [--staged] TP PP CP | test_comm --fenced MODE | "
		                "test_comm --die RANK TIMEOUT | "
		                "test_comm --stop RANK TIMEOUT collective|split\n");
		return 2;
	}
	char **size = argv + 1 + staged;
	if (rl_layout_init(&l, world, atoi(size[0]), atoi(size[1]), atoi(size[2]), 1, 1, err,
	                   sizeof err) ||
	    rl_dist_init(&d, &l, NULL, -1, 60, err, sizeof err) ||
	    (staged &&
	     rl_dist_connect_devices(&d, RL_COMM_STAGED, &memcpy_stage, err, sizeof err))) {
		fprintf(stderr, "test_comm: %s\n", err);
		return 1;
	}
	me = d.rank;
	check_membership(&d);
	for (int g = 0; g < RL_N_GROUPS; g++)
		if (d.g[g]) {
			CHECK(!staged || rl_comm_device(d.g[g]) != d.g[g],
			      "group %s has no staged face", rl_group_name((enum rl_group)g));
			check_group(staged ? rl_comm_device(d.g[g]) : d.g[g]);
		}
	rl_dist_finalize(&d);
	if (me == 0 || failures)
		printf("test_comm: rank %d: %d checks, %d failed\n", me, checks, failures);
	return failures ? 1 : 0;
}
