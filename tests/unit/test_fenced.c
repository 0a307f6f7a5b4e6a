/* The fenced backend is what lets CI hold the runtime to the GPU's memory
 * rules, so it must itself be able to fail: host access to its memory must
 * fault, host memory handed to an op must be refused, and within the rules
 * it must compute what the CPU table computes. */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "kernels/fenced.h"

static const struct rl_ops *F = &rl_ops_fenced;

Test(fenced, table_is_complete)
{
	cr_expect_null(rl_ops_missing(F), "missing %s", rl_ops_missing(F));
	cr_expect_str_eq(F->name, "fenced");
}

Test(fenced, host_access_faults)
{
	float *dev = F->alloc(16 * sizeof(float));
	pid_t pid;
	int status;

	cr_assert_not_null(dev);
	fflush(NULL);
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		/* the default action, whatever a sanitizer installed */
		struct sigaction dfl = {.sa_handler = SIG_DFL};
		sigaction(SIGSEGV, &dfl, NULL);
		sigaction(SIGBUS, &dfl, NULL);
		volatile float *p = dev + 3;
		p[0] = 1.0f;
		_exit(0);
	}
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_expect(WIFSIGNALED(status) &&
	              (WTERMSIG(status) == SIGSEGV || WTERMSIG(status) == SIGBUS),
	          "a host write to fenced memory did not fault (status %#x)", status);
	F->release(dev);
}

Test(fenced, host_memory_refused_by_ops)
{
	float host[4] = {1, 2, 3, 4}, back[4];
	float *dev = F->alloc(sizeof host);

	cr_assert_not_null(dev);
	cr_expect_eq(F->add(rl_buf_f32(host), rl_cbuf_f32(host), 4, NULL), -1,
	             "add took host memory");
	cr_expect_eq(F->from_host(dev, dev, sizeof host, NULL), -1, "from_host took a device src");
	cr_expect_eq(F->to_host(dev, dev, sizeof host, NULL), -1, "to_host took a device dst");
	cr_expect_eq(F->copy(dev, host, sizeof host, NULL), -1, "copy took a host src");
	double total_host = 0;
	cr_expect_eq(F->sum_squares(&total_host, dev, 4, NULL), -1,
	             "sum_squares took a host total");
	/* NULL only where the contract allows it */
	cr_expect_eq(F->rmsnorm_forward(rl_buf_f32(dev), NULL, rl_cbuf_f32(dev), rl_cbuf_f32(NULL),
	                                1, 4, 0.0f, NULL),
	             -1, "rmsnorm took a NULL weight");
	cr_expect_eq(F->from_host(dev, host, sizeof host, NULL), 0);
	cr_expect_eq(F->to_host(back, dev, sizeof back, NULL), 0);
	cr_expect_arr_eq(back, host, sizeof host);
	F->release(dev);
}

Test(fenced, computes_what_the_cpu_does)
{
	float x[5] = {1, -2, 3, 0.5f, 4}, y[5] = {0.25f, 1, -1, 2, 8}, want[5], got[5];
	double ss_want = 0, ss_got = 0;
	float *dx = F->alloc(sizeof x), *dy = F->alloc(sizeof y);
	double *dss = F->alloc(sizeof(double));

	cr_assert(dx && dy && dss);
	memcpy(want, y, sizeof y);
	cr_assert_eq(rl_ops_cpu.add(rl_buf_f32(want), rl_cbuf_f32(x), 5, NULL), 0);
	cr_assert_eq(rl_ops_cpu.sum_squares(&ss_want, want, 5, NULL), 0);
	cr_assert_eq(F->from_host(dx, x, sizeof x, NULL), 0);
	cr_assert_eq(F->from_host(dy, y, sizeof y, NULL), 0);
	cr_assert_eq(F->zero(dss, sizeof(double), NULL), 0);
	cr_assert_eq(F->add(rl_buf_f32(dy), rl_cbuf_f32(dx), 5, NULL), 0);
	cr_assert_eq(F->sum_squares(dss, dy, 5, NULL), 0);
	cr_assert_eq(F->to_host(got, dy, sizeof got, NULL), 0);
	cr_assert_eq(F->to_host(&ss_got, dss, sizeof ss_got, NULL), 0);
	cr_expect_arr_eq(got, want, sizeof want);
	cr_expect_eq(ss_got, ss_want);
	F->release(dx);
	F->release(dy);
	F->release(dss);
}
