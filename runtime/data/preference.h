/* Preference pairs for DPO from JSONL, in NeMo-RL's two formats:
 *  - BinaryPreferenceDataset: {"prompt": ..., "chosen": ..., "rejected": ...}
 *    with configurable key names; the prompt a string or a list holding
 *    one user message;
 *  - PreferenceDataset: {"context": [messages], "completions": [{"rank": r,
 *    "completion": [messages]}, ...]} with exactly two completions of
 *    different ranks (the lower rank is chosen, as NeMo-RL's preprocessor
 *    takes it), the context one user message and each completion one
 *    assistant message.
 * A pair becomes an rl_example: problem = the prompt's text, answer = the
 * chosen response, rejected = the rejected one. Multi-turn contexts are
 * refused with a message that says so.
 * defines: enum rl_pref_format, rl_pref_format_parse, rl_dataset_load_preference */
#ifndef RL_DATA_PREFERENCE_H
#define RL_DATA_PREFERENCE_H

#include <stddef.h>

#include "runtime/data/dataset.h"

enum rl_pref_format { RL_PREF_BINARY, RL_PREF_RANKED };

/* "BinaryPreferenceDataset" or "PreferenceDataset": 0 and *f; else -1. */
int rl_pref_format_parse(const char *dataset_name, enum rl_pref_format *f);

/* Reads PATH (keys used by the binary format only). Errors name
 * FILE:LINE and the field, as rl_dataset_load_jsonl's. Returns 0 and
 * fills *ds, or -1 with the message in err. */
int rl_dataset_load_preference(const char *path, enum rl_pref_format format, const char *prompt_key,
                               const char *chosen_key, const char *rejected_key,
                               struct rl_dataset *ds, char *err, size_t errlen);

#endif
