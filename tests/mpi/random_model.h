/* The MPI model tests' model: random weights, and its vectors drawn too
 * (norms near 1, biases near 0), since a new model's 1s and 0s would hide
 * a bias added twice, a norm weight applied to the wrong rows or a tensor
 * never sent. Include after mpi_check.h.
 * defines: random_model */
#ifndef RL_TESTS_MPI_RANDOM_MODEL_H
#define RL_TESTS_MPI_RANDOM_MODEL_H

#include <string.h>

#include "runtime/model/model.h"

/* seed: the matrices'; stream: the first vector's draws (vector i takes
 * stream + i). */
static inline struct rl_model *random_model(const struct rl_model_config *c, uint64_t seed,
                                            uint32_t stream)
{
	struct rl_model *m;
	char err[256];

	must(rl_model_new_random(&m, c, "test", &rl_ops_cpu, seed, 0.2, err, sizeof err), "model",
	     err);
	for (int i = 0; i < m->n_params; i++) {
		struct rl_param *p = &m->params[i];
		uint32_t s = stream + (uint32_t)i;

		if (p->ndim == 1)
			for (int64_t k = 0; k < p->numel; k++)
				p->data[k] =
				    (strstr(p->name, "norm") ? 1.0f : 0.0f) + 0.3f * uniform(&s);
	}
	return m;
}

#endif
