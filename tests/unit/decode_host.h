/* rl_model_decode with the logits brought to the host, for the tests that
 * compare them with a reference.
 * defines: decode_host */
#ifndef RL_TESTS_DECODE_HOST_H
#define RL_TESTS_DECODE_HOST_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/model/kv_cache.h"

static inline int decode_host(struct rl_model *m, struct rl_kv_cache *kv, int n, const int *slots,
                              const int *n_new, const int32_t *ids, float *logits, char *err,
                              size_t errlen)
{
	const float *dev;

	if (rl_model_decode(m, kv, n, slots, n_new, ids, &dev, err, errlen))
		return -1;
	return m->ops->to_host(logits, dev, (size_t)n * (size_t)m->cfg.vocab_size * sizeof(float),
	                       NULL);
}

#endif
