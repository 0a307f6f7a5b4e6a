/* YAML's merge key (`<<: *ANCHOR`), which NeMo-RL's configs use (its
 * distillation example's `teacher: <<: *POLICY_BASE`): the mappings under
 * `<<` give their keys where the mapping does not set them (its own win),
 * at every level. Expanded before overrides and references, as a YAML
 * loader would at parse time: a merged `${..model_name}` then resolves in
 * the mapping it was merged into. */
#include "runtime/config/internal.h"

void rl_cfg_expand_merges(struct rl_ynode *map)
{
	if (!map || map->kind != RL_Y_MAP)
		return;
	while (rl_ymap_find(map, "<<")) {
		struct rl_ynode *from = rl_ymap_take(map, "<<");
		size_t n = from->kind == RL_Y_SEQ ? from->n : 1;

		for (size_t i = 0; i < n; i++) {
			struct rl_ynode *src = from->kind == RL_Y_SEQ ? from->items[i].value : from;
			if (src->kind != RL_Y_MAP)
				continue;
			for (size_t j = 0; j < src->n; j++)
				if (!rl_ymap_find(map, src->items[j].key))
					rl_ymap_set(map, src->items[j].key, src->items[j].line,
					            src->items[j].col,
					            rl_ynode_copy(src->items[j].value));
		}
		rl_ynode_free(from);
	}
	for (size_t i = 0; i < map->n; i++)
		if (map->items[i].value->kind == RL_Y_MAP)
			rl_cfg_expand_merges(map->items[i].value);
}
