/* The one table that describes every config key. The validator, the
 * defaults, `rlrun config --schema`, the resolved-config printer and the key
 * table of rl-config(5) are all generated from it, so they cannot disagree. */
#ifndef RL_SCHEMA_H
#define RL_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum rl_key_type {
	RL_T_BOOL,         /* bool */
	RL_T_INT,          /* int64_t */
	RL_T_OPT_INT,      /* struct rl_opt_int: an integer or null */
	RL_T_FLOAT,        /* double */
	RL_T_OPT_FLOAT,    /* struct rl_opt_float: a number or null */
	RL_T_STRING,       /* char *, NULL when null is allowed and given */
	RL_T_ENUM,         /* char *, one of `choices` */
	RL_T_INT_LIST,     /* struct rl_int_list; null reads as empty */
	RL_T_FLOAT_LIST,   /* struct rl_float_list */
	RL_T_STRING_LIST,  /* struct rl_str_list; null reads as empty */
	RL_T_JSON_MAP,     /* char *: a mapping (of any values) as JSON object text; null: NULL */
	RL_T_AUTO_SECTION, /* bool: the section is the word `auto` instead of a mapping */
	RL_T_SCHEDULERS,   /* struct rl_cfg_sched_list: NeMo-RL's torch scheduler list */
	RL_T_UNSUPPORTED,  /* a NeMo-RL key slurm-rl does not implement (no storage) */
};

enum {
	RL_K_REQUIRED = 1u << 0, /* no default: the config must set it */
	RL_K_NULLABLE = 1u << 1, /* STRING / ENUM: null is a valid value */
	RL_K_MIN_OPEN = 1u << 2, /* the lower bound itself is excluded */
	RL_K_IN_ENV = 1u << 3,   /* offset is into struct rl_cfg_env (path env.*.x) */
	RL_K_NEMO = 1u << 4,     /* UNSUPPORTED: a NeMo-RL block nemo.c reads into our keys */
};

struct rl_key {
	const char *path; /* dotted; `*` matches one name (env.*.command) */
	enum rl_key_type type;
	size_t offset;       /* into struct rl_config (or rl_cfg_env) */
	const char *def;     /* default as YAML text; NULL for required keys */
	double min, max;     /* for numbers; min > max means unbounded */
	const char *choices; /* ENUM: "a|b|c" */
	unsigned flags;
	const char *doc;    /* one line; for UNSUPPORTED: what to do instead */
	const char *accept; /* UNSUPPORTED: the one harmless value (the feature off), or NULL */
	size_t list_len;    /* FLOAT_LIST: exact length, 0 for any */
};

extern const struct rl_key rl_schema[];
extern const size_t rl_schema_len;

/* Finds the entry for a dotted path (with env.<name>. matching env.*.), or for
 * an UNSUPPORTED section that contains it. NULL when unknown. */
const struct rl_key *rl_schema_find(const char *path);
/* NeMo-RL's switched blocks: the key that switches the block at `path` on,
 * either a key inside it ("enabled") or a dotted path elsewhere
 * ("logger.wandb_enabled"); NULL when `path` is not such a block. A block we
 * do not implement is accepted and ignored, with a note, while it is
 * switched off (validate.c). */
const char *rl_schema_switch(const char *path);
/* True when some key lives below `path` (it names a section). */
bool rl_schema_is_section(const char *path);
/* Writes the known key or section nearest to `path` by edit distance into
 * out; false when nothing is near enough to suggest. */
bool rl_schema_suggest(const char *path, char *out, size_t cap);
/* The allowed range of a numeric key as "[lo, hi]"; false when unbounded. */
bool rl_key_range_text(const struct rl_key *k, char *out, size_t cap);
/* Human name of a type, for messages and docs. */
const char *rl_key_type_name(const struct rl_key *k);

#endif
