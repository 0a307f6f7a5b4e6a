/* The bookkeeping behind rl_ops_alloc: a hash table from address to
 * (kind, bytes), open addressing with linear probing and backward-shift
 * deletion (no tombstones), grown at half full, behind one mutex. The
 * runtime allocates per step, not per op, so the lock is not hot. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/memory_use.h"

struct slot {
	uintptr_t addr; /* 0: empty */
	size_t bytes;
	int kind;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct slot *slots;
static size_t cap, used;
static struct rl_mem_use use;

static const char *const names[RL_MEM_KINDS] = {"weights",   "grads",       "optimizer",
                                                "reference", "activations", "kv_cache"};

const char *rl_mem_kind_name(enum rl_mem_kind kind)
{
	return (unsigned)kind < RL_MEM_KINDS ? names[kind] : "unknown";
}

static size_t hash(uintptr_t a)
{
	/* allocations are 16-byte aligned or more: drop the low bits, then
	 * mix (Fibonacci hashing) */
	return (size_t)(((uint64_t)(a >> 4) * 0x9e3779b97f4a7c15ull) >> 17);
}

static int grow(void)
{
	size_t ncap = cap ? 2 * cap : 1024;
	struct slot *n = calloc(ncap, sizeof *n);

	if (!n)
		return -1;
	for (size_t i = 0; i < cap; i++) {
		if (!slots[i].addr)
			continue;
		size_t j = hash(slots[i].addr) & (ncap - 1);

		while (n[j].addr)
			j = (j + 1) & (ncap - 1);
		n[j] = slots[i];
	}
	free(slots);
	slots = n;
	cap = ncap;
	return 0;
}

static int insert(uintptr_t a, size_t bytes, int kind)
{
	if (2 * (used + 1) > cap && grow())
		return -1;
	size_t j = hash(a) & (cap - 1);

	while (slots[j].addr)
		j = (j + 1) & (cap - 1);
	slots[j] = (struct slot){a, bytes, kind};
	used++;
	use.live[kind] += bytes;
	if (use.live[kind] > use.peak[kind])
		use.peak[kind] = use.live[kind];
	return 0;
}

/* Removes a's entry, if any, shifting later entries of its probe run back
 * into the hole so that every lookup still finds its entry. */
static void erase(uintptr_t a)
{
	if (!cap)
		return;
	size_t j = hash(a) & (cap - 1);

	while (slots[j].addr && slots[j].addr != a)
		j = (j + 1) & (cap - 1);
	if (!slots[j].addr)
		return;
	use.live[slots[j].kind] -= slots[j].bytes;
	used--;

	size_t hole = j;

	for (size_t k = (j + 1) & (cap - 1); slots[k].addr; k = (k + 1) & (cap - 1)) {
		size_t home = hash(slots[k].addr) & (cap - 1);

		/* k may move to the hole when its home is not in (hole, k] */
		if ((k > hole && (home <= hole || home > k)) ||
		    (k < hole && home <= hole && home > k)) {
			slots[hole] = slots[k];
			hole = k;
		}
	}
	slots[hole].addr = 0;
}

void *rl_ops_alloc(const struct rl_ops *ops, enum rl_mem_kind kind, size_t bytes)
{
	if ((unsigned)kind >= RL_MEM_KINDS)
		return NULL;

	void *p = ops->alloc(bytes);

	if (!p)
		return NULL;
	pthread_mutex_lock(&lock);
	int rc = insert((uintptr_t)p, bytes, (int)kind);
	pthread_mutex_unlock(&lock);
	if (rc) {
		ops->release(p);
		return NULL;
	}
	return p;
}

void rl_ops_release(const struct rl_ops *ops, void *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&lock);
	erase((uintptr_t)p);
	pthread_mutex_unlock(&lock);
	ops->release(p);
}

void rl_mem_use_read(struct rl_mem_use *out)
{
	pthread_mutex_lock(&lock);
	*out = use;
	pthread_mutex_unlock(&lock);
}
