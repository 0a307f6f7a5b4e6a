/* The NCCL backend on device buffers, driven directly through its vtable
 * (start, then test until done) as comm.c drives it, against values each
 * rank computes on the host from a formula. Run as mpiexec -n N (N = 1, 2
 * or more); exits 77 where no CUDA device is visible, or where a node has
 * fewer devices than ranks. */
#define _POSIX_C_SOURCE 200809L
#include <cuda_runtime.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/comm/backend.h"

#define K    1000 /* elements per rank and operation */
#define SKIP 77

static int world_rank, world_size, checks, failures;

/* Fatal: the other ranks would wait forever for this one's collective. */
static _Noreturn void die(const struct rl_comm *g, const char *what, const char *why)
{
	fprintf(stderr, "FAIL: %s on %s (world rank %d): %s\n", what, g ? g->name : "-", world_rank,
	        why);
	MPI_Abort(MPI_COMM_WORLD, 1);
	exit(1);
}

static void cuda_ok(cudaError_t rc, const char *call)
{
	if (rc != cudaSuccess)
		die(NULL, call, cudaGetErrorString(rc));
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void run(struct rl_comm *g, const struct rl_comm_op *op, const char *what)
{
	char err[512] = "";
	void *req = NULL;
	double t0 = now();
	int rc;

	if (rl_comm_nccl_backend.start(g, op, &req, err, sizeof err))
		die(g, what, err);
	while ((rc = rl_comm_nccl_backend.test(g, req, err, sizeof err)) == 0) {
		if (now() - t0 > 120)
			die(g, what, "not complete after 120 s");
	}
	if (rc < 0)
		die(g, what, err);
}

static void *to_device(const void *host, size_t bytes)
{
	void *d = NULL;

	cuda_ok(cudaMalloc(&d, bytes), "cudaMalloc");
	cuda_ok(cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to device");
	return d;
}

static double value(enum rl_comm_dtype t, const void *p, size_t i)
{
	switch (t) {
	case RL_COMM_F32:
		return ((const float *)p)[i];
	case RL_COMM_F64:
		return ((const double *)p)[i];
	case RL_COMM_I32:
		return ((const int32_t *)p)[i];
	case RL_COMM_I64:
		return (double)((const int64_t *)p)[i];
	case RL_COMM_U8:
		break;
	}
	return ((const uint8_t *)p)[i];
}

/* Every value the checks use is exact in its type: equality, not tolerance. */
static void expect(const struct rl_comm *g, const char *what, enum rl_comm_dtype t, const void *dev,
                   const void *want, size_t n)
{
	size_t es = rl_comm_dtype_size(t);
	unsigned char *got = malloc(n * es);

	if (!got)
		die(g, what, "out of memory");
	cuda_ok(cudaMemcpy(got, dev, n * es, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
	checks++;
	for (size_t i = 0; i < n; i++) {
		if (memcmp(got + i * es, (const unsigned char *)want + i * es, es)) {
			fprintf(
			    stderr,
			    "FAIL: %s on %s (rank %d of %d): element %zu is %.17g, want %.17g\n",
			    what, g->name, g->rank, g->size, i, value(t, got, i),
			    value(t, want, i));
			failures++;
			break;
		}
	}
	free(got);
}

static void check_reduce(struct rl_comm *g)
{
	int r = g->rank, n = g->size;
	float f[K], fw[K];
	double d[K], dw[K];
	int32_t i32[K], i32w[K];
	int64_t i64[K], i64w[K];
	uint8_t u8[K], u8w[K];

	for (int i = 0; i < K; i++) {
		f[i] = (float)(r + 1 + i * 0.5);
		fw[i] = (float)(n * (n + 1) / 2 + n * i * 0.5);
		d[i] = (r + 1) * (i + 1) * 0.25;
		dw[i] = n * (i + 1) * 0.25;
		i32[i] = (r + 1) * (i - 500);
		i32w[i] = i < 500 ? n * (i - 500) : i - 500;
		i64[i] = (int64_t)r * ((int64_t)1 << 33) + i;
		i64w[i] = (int64_t)n * (n - 1) / 2 * ((int64_t)1 << 33) + (int64_t)n * i;
		u8[i] = (uint8_t)((r + i) % 7);
		u8w[i] = 0;
		for (int q = 0; q < n; q++)
			u8w[i] = (uint8_t)(u8w[i] + (q + i) % 7);
	}
	struct {
		const char *what;
		enum rl_comm_dtype t;
		enum rl_comm_reduce red;
		void *host, *want;
	} cases[] = {
	    {"all_reduce sum f32", RL_COMM_F32, RL_COMM_SUM, f, fw},
	    {"all_reduce max f64", RL_COMM_F64, RL_COMM_MAX, d, dw},
	    {"all_reduce min i32", RL_COMM_I32, RL_COMM_MIN, i32, i32w},
	    {"all_reduce sum i64", RL_COMM_I64, RL_COMM_SUM, i64, i64w},
	    {"all_reduce sum u8", RL_COMM_U8, RL_COMM_SUM, u8, u8w},
	};
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		void *buf = to_device(cases[c].host, K * rl_comm_dtype_size(cases[c].t));
		struct rl_comm_op op = {.kind = RL_OP_ALL_REDUCE,
		                        .send = buf,
		                        .recv = buf,
		                        .count = K,
		                        .dtype = cases[c].t,
		                        .reduce = cases[c].red};

		run(g, &op, cases[c].what);
		expect(g, cases[c].what, cases[c].t, buf, cases[c].want, K);
		cudaFree(buf);
	}
}

static void check_scatter_gather(struct rl_comm *g, const int *members)
{
	int r = g->rank, n = g->size;
	size_t all = (size_t)n * K;
	float *fs = malloc(all * sizeof *fs), fw[K];
	int32_t *iw = malloc(all * sizeof *iw), is[K];
	double *dd = malloc(all * sizeof *dd), *dw = malloc(all * sizeof *dw);
	int32_t me = world_rank;

	if (!fs || !iw || !dd || !dw)
		die(g, "gather", "out of memory");
	for (int b = 0; b < n; b++)
		for (int i = 0; i < K; i++) {
			fs[b * K + i] = (float)((r + 1) * (b + 1) + i);
			iw[b * K + i] = b * 1000 + i;
			dd[b * K + i] = b == r ? r * 0.5 + i : -1;
			dw[b * K + i] = b * 0.5 + i;
		}
	for (int i = 0; i < K; i++) {
		fw[i] = (float)((r + 1) * n * (n + 1) / 2 + n * i);
		is[i] = r * 1000 + i;
	}

	float *send = to_device(fs, all * sizeof *fs), *recv = to_device(fw, sizeof fw);
	struct rl_comm_op op = {.kind = RL_OP_REDUCE_SCATTER,
	                        .send = send,
	                        .recv = recv,
	                        .count = K,
	                        .dtype = RL_COMM_F32,
	                        .reduce = RL_COMM_SUM};
	cuda_ok(cudaMemset(recv, 0, sizeof fw), "cudaMemset");
	run(g, &op, "reduce_scatter sum f32");
	expect(g, "reduce_scatter sum f32", RL_COMM_F32, recv, fw, K);
	cudaFree(send);
	cudaFree(recv);

	int32_t *isend = to_device(is, sizeof is), *irecv = to_device(iw, all * sizeof *iw);
	cuda_ok(cudaMemset(irecv, 0, all * sizeof *iw), "cudaMemset");
	op = (struct rl_comm_op){.kind = RL_OP_ALL_GATHER,
	                         .send = isend,
	                         .recv = irecv,
	                         .count = K,
	                         .dtype = RL_COMM_I32};
	run(g, &op, "all_gather i32");
	expect(g, "all_gather i32", RL_COMM_I32, irecv, iw, all);
	cudaFree(isend);
	cudaFree(irecv);

	double *dbuf = to_device(dd, all * sizeof *dd);
	op = (struct rl_comm_op){.kind = RL_OP_ALL_GATHER,
	                         .send = dbuf + (size_t)r * K,
	                         .recv = dbuf,
	                         .count = K,
	                         .dtype = RL_COMM_F64};
	run(g, &op, "all_gather in place f64");
	expect(g, "all_gather in place f64", RL_COMM_F64, dbuf, dw, all);
	cudaFree(dbuf);

	/* who is rank b of the group: checks that color and key were honoured */
	int32_t *mdev = to_device(iw, (size_t)n * sizeof *iw);
	int32_t *mine = to_device(&me, sizeof me);
	op = (struct rl_comm_op){
	    .kind = RL_OP_ALL_GATHER, .send = mine, .recv = mdev, .count = 1, .dtype = RL_COMM_I32};
	run(g, &op, "all_gather world ranks");
	expect(g, "membership (all_gather world ranks)", RL_COMM_I32, mdev, members, (size_t)n);
	cudaFree(mdev);
	cudaFree(mine);
	free(fs);
	free(iw);
	free(dd);
	free(dw);
}

static void check_point_to_point(struct rl_comm *g)
{
	int r = g->rank, n = g->size, root = n - 1;
	double b[K], bw[K];
	size_t all = (size_t)n * K;
	float *s = malloc(all * sizeof *s), *w = malloc(all * sizeof *w);

	if (!s || !w)
		die(g, "all_to_all", "out of memory");
	for (int i = 0; i < K; i++) {
		bw[i] = 7 + i * 0.25;
		b[i] = r == root ? bw[i] : -1;
	}
	double *bdev = to_device(b, sizeof b);
	struct rl_comm_op op = {.kind = RL_OP_BROADCAST,
	                        .send = bdev,
	                        .recv = bdev,
	                        .count = K,
	                        .dtype = RL_COMM_F64,
	                        .peer = root};
	run(g, &op, "broadcast f64 from the last rank");
	expect(g, "broadcast f64 from the last rank", RL_COMM_F64, bdev, bw, K);
	cudaFree(bdev);

	for (int p = 0; p < n; p++)
		for (int i = 0; i < K; i++) {
			s[p * K + i] = (float)(r * 10000 + p * 100 + i % 100);
			w[p * K + i] = (float)(p * 10000 + r * 100 + i % 100);
		}
	float *sdev = to_device(s, all * sizeof *s), *rdev = to_device(s, all * sizeof *s);
	op = (struct rl_comm_op){
	    .kind = RL_OP_ALL_TO_ALL, .send = sdev, .recv = rdev, .count = K, .dtype = RL_COMM_F32};
	run(g, &op, "all_to_all f32");
	expect(g, "all_to_all f32", RL_COMM_F32, rdev, w, all);

	/* pairs (0,1), (2,3) ...: the lower sends first and the higher receives
	 * first, since each call here completes before the next starts; each
	 * sends the block its all_to_all addressed to the other */
	int peer = r ^ 1;
	if (peer < n) {
		struct rl_comm_op snd = {.kind = RL_OP_SEND,
		                         .send = sdev + (size_t)peer * K,
		                         .count = K,
		                         .dtype = RL_COMM_F32,
		                         .peer = peer};
		struct rl_comm_op rcv = {.kind = RL_OP_RECV,
		                         .recv = rdev,
		                         .count = K,
		                         .dtype = RL_COMM_F32,
		                         .peer = peer};
		for (int i = 0; i < K; i++)
			w[i] = (float)(peer * 10000 + r * 100 + i % 100);
		cuda_ok(cudaMemset(rdev, 0, all * sizeof *s), "cudaMemset");
		run(g, r < peer ? &snd : &rcv, "send/recv");
		run(g, r < peer ? &rcv : &snd, "send/recv");
		expect(g, "send/recv f32 with the pair rank", RL_COMM_F32, rdev, w, K);
	}
	cudaFree(sdev);
	cudaFree(rdev);
	free(s);
	free(w);

	op = (struct rl_comm_op){.kind = RL_OP_BARRIER};
	run(g, &op, "barrier");
	run(g, &op, "second barrier");
	checks++;
}

static void check_group(struct rl_comm *g, const int *members)
{
	check_reduce(g);
	check_scatter_gather(g, members);
	check_point_to_point(g);
}

static void init_group(struct rl_comm *g, const char *name, int rank, int size, int *members)
{
	memset(g, 0, sizeof *g);
	g->be = &rl_comm_nccl_backend;
	snprintf(g->name, sizeof g->name, "%s", name);
	g->rank = rank;
	g->size = size;
	g->members = members;
}

/* 0 where this program must skip: no device on some rank, or fewer
 * devices than ranks on a node (NCCL refuses two ranks on one GPU). */
static int device_count(int *lrank)
{
	MPI_Comm local;
	int n = 0, lsize, why, worst;
	cudaError_t rc = cudaGetDeviceCount(&n);

	if (rc != cudaSuccess)
		n = 0;
	MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
	MPI_Comm_rank(local, lrank);
	MPI_Comm_size(local, &lsize);
	MPI_Comm_free(&local);
	why = n == 0 ? 2 : lsize > n ? 1 : 0;
	MPI_Allreduce(&why, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	if (worst == 2 && world_rank == 0)
		printf("SKIP: no CUDA device (%s)\n",
		       rc != cudaSuccess ? cudaGetErrorString(rc) : "on some rank");
	else if (worst == 1 && world_rank == 0)
		printf("SKIP: %d ranks on a node with %d CUDA devices: NCCL needs one each\n",
		       lsize, n);
	return worst ? 0 : n;
}

int main(int argc, char **argv)
{
	char err[512];
	MPI_Comm *wm;
	int lrank, ndev, n, r, parity;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
	MPI_Comm_size(MPI_COMM_WORLD, &world_size);
	n = world_size;
	r = world_rank;
	ndev = device_count(&lrank);
	if (!ndev) {
		MPI_Finalize();
		return SKIP;
	}
	cuda_ok(cudaSetDevice(lrank % ndev), "cudaSetDevice");

	int *ids = malloc(4 * (size_t)n * sizeof *ids);
	struct rl_comm mpi, world, rev, par, mpar, neg, gone;
	wm = malloc(sizeof *wm);
	if (!ids || !wm)
		die(NULL, "setup", "out of memory");
	MPI_Comm_dup(MPI_COMM_WORLD, wm);
	memset(&mpi, 0, sizeof mpi);
	mpi.impl = wm;
	snprintf(mpi.name, sizeof mpi.name, "mpi world");
	mpi.rank = r;
	mpi.size = n;

	/* world: 0..n-1; rev: n-1..0; par, same parity ascending; mpar, same
	 * parity descending (key -r through MPI) */
	int *wid = ids, *rid = ids + n, *pid = ids + 2 * n, *mid = ids + 3 * n, np = 0;
	parity = r % 2;
	for (int q = 0; q < n; q++) {
		wid[q] = q;
		rid[q] = n - 1 - q;
		if (q % 2 == parity)
			pid[np++] = q;
	}
	for (int q = 0; q < np; q++)
		mid[q] = pid[np - 1 - q];
	init_group(&world, "nccl world", r, n, wid);
	init_group(&rev, "reversed", n - 1 - r, n, rid);
	init_group(&par, "parity", r / 2, np, pid);
	init_group(&mpar, "parity via MPI", np - 1 - r / 2, np, mid);

	if (rl_comm_nccl_from_mpi(&mpi, 0, r, &world, err, sizeof err))
		die(&world, "rl_comm_nccl_from_mpi", err);
	if (rl_comm_nccl_backend.split(&world, 0, n - 1 - r, &rev, err, sizeof err))
		die(&rev, "split", err);
	if (rl_comm_nccl_backend.split(&world, parity, r, &par, err, sizeof err))
		die(&par, "split", err);
	if (rl_comm_nccl_from_mpi(&mpi, parity, -r, &mpar, err, sizeof err))
		die(&mpar, "rl_comm_nccl_from_mpi", err);
	check_group(&world, wid);
	check_group(&rev, rid);
	check_group(&par, pid);
	check_group(&mpar, mid);

	/* every rank passes a negative color: comm.h's contract is that such a
	 * rank takes part in the split (NCCL's and MPI's are collective) and
	 * joins no group, with success and no communicator */
	init_group(&neg, "negative color", 0, 0, NULL);
	err[0] = 0;
	checks++;
	if (rl_comm_nccl_backend.split(&world, -1, r, &neg, err, sizeof err) || neg.impl) {
		fprintf(stderr, "FAIL: split with color -1 did not join no group: %s\n", err);
		failures++;
	}
	err[0] = 0;
	checks++;
	if (rl_comm_nccl_from_mpi(&mpi, -1, r, &neg, err, sizeof err) || neg.impl) {
		fprintf(stderr,
		        "FAIL: rl_comm_nccl_from_mpi with color -1 did not join no group: %s\n",
		        err);
		failures++;
	}

	/* abort, then the free that rl_comm_free would still call */
	init_group(&gone, "aborted", r, n, wid);
	if (rl_comm_nccl_backend.split(&world, 0, r, &gone, err, sizeof err))
		die(&gone, "split", err);
	rl_comm_nccl_backend.abort(&gone);
	rl_comm_nccl_backend.abort(&gone);
	rl_comm_nccl_backend.free(&gone);
	checks++;
	if (gone.impl) {
		fprintf(stderr, "FAIL: abort left the impl behind\n");
		failures++;
	}

	rl_comm_nccl_backend.free(&mpar);
	rl_comm_nccl_backend.free(&par);
	rl_comm_nccl_backend.free(&rev);
	rl_comm_nccl_backend.free(&world);
	rl_comm_nccl_backend.free(&world);
	MPI_Comm_free(wm);
	free(wm);
	free(ids);

	int total[2], mine[2] = {checks, failures};
	MPI_Allreduce(mine, total, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	MPI_Finalize();
	if (total[1]) {
		if (r == 0)
			printf("comm_nccl_check: %d of %d checks failed\n", total[1], total[0]);
		return 1;
	}
	if (r == 0)
		printf("comm_nccl_check: %d checks passed\n", total[0]);
	return 0;
}
