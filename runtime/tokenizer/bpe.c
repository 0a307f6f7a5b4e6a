/* Byte-level BPE of one pre-token: each byte starts as the token of its
 * stand-in character (GPT-2's byte-to-unicode map), then merges are applied
 * lowest rank first, leftmost first among equal ranks, with a binary heap
 * and a linked list of symbols, as `tokenizers`' Word::merge_all does, down
 * to its check that a queued pair still yields the same new id. */
#include <stdlib.h>
#include <string.h>

#include "runtime/tokenizer/internal.h"

/* Bytes that print as themselves keep their code point; the other 68 get
 * U+0100.. in byte order. */
uint32_t rl_tok_byte_to_char(unsigned char b)
{
	if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174)
		return b;
	if (b < 33)
		return 256u + b;
	if (b <= 160)
		return 256u + 33 + (b - 127u);
	return 256u + 33 + 34; /* 173, the soft hyphen */
}

int rl_tok_char_to_byte(uint32_t cp)
{
	if (cp < 256)
		return rl_tok_byte_to_char((unsigned char)cp) == cp ? (int)cp : -1;
	if (cp < 256 + 33)
		return (int)(cp - 256);
	if (cp < 256 + 33 + 34)
		return (int)(cp - 256 - 33 + 127);
	return cp == 256 + 33 + 34 ? 173 : -1;
}

struct symbol {
	int32_t id;
	int32_t prev, next; /* -1 at the ends */
	bool gone;          /* merged into its left neighbour */
};

struct merge {
	int32_t rank, pos, new_id;
};

static bool before(const struct merge *a, const struct merge *b)
{
	return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static void heap_push(struct merge *h, size_t *n, struct merge m)
{
	size_t i = (*n)++;

	while (i > 0 && before(&m, &h[(i - 1) / 2])) {
		h[i] = h[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h[i] = m;
}

static struct merge heap_pop(struct merge *h, size_t *n)
{
	struct merge top = h[0], last = h[--*n];
	size_t i = 0;

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= *n)
			break;
		if (c + 1 < *n && before(&h[c + 1], &h[c]))
			c++;
		if (!before(&h[c], &last))
			break;
		h[i] = h[c];
		i = c;
	}
	if (*n > 0)
		h[i] = last;
	return top;
}

static void queue_pair(const struct rl_tokenizer *tok, struct symbol *sym, int32_t pos,
                       struct merge *heap, size_t *n)
{
	const struct rl_tok_merge *m;

	if (pos < 0 || sym[pos].next < 0)
		return;
	m = rl_tok_merges_find(&tok->merges, sym[pos].id, sym[sym[pos].next].id);
	if (m)
		heap_push(heap, n, (struct merge){m->rank, pos, m->new_id});
}

/* The whole pre-token as one vocabulary entry, in the byte-level alphabet. */
static int32_t whole_word(const struct rl_tokenizer *tok, const unsigned char *s, size_t len,
                          char *buf)
{
	size_t n = 0;

	for (size_t i = 0; i < len; i++) {
		uint32_t cp = rl_tok_byte_to_char(s[i]);

		if (cp < 0x80) {
			buf[n++] = (char)cp;
		} else {
			buf[n++] = (char)(0xc0 | cp >> 6);
			buf[n++] = (char)(0x80 | (cp & 0x3f));
		}
	}
	return rl_tok_vocab_find(tok, buf, n);
}

/* Symbols from bytes; bytes without a token become unk (fused if asked) or
 * vanish, as in BPE::merge_word. */
static size_t initial_symbols(const struct rl_tokenizer *tok, const unsigned char *s, size_t len,
                              struct symbol *sym)
{
	size_t n = 0;
	bool last_unk = false;

	for (size_t i = 0; i < len; i++) {
		int32_t id = tok->byte_ids[s[i]];

		if (id < 0) {
			if (tok->unk_id < 0 || (last_unk && tok->fuse_unk))
				continue;
			id = tok->unk_id;
		}
		last_unk = id == tok->unk_id && tok->byte_ids[s[i]] < 0;
		sym[n] = (struct symbol){id, (int32_t)n - 1, (int32_t)n + 1, false};
		n++;
	}
	if (n > 0)
		sym[n - 1].next = -1;
	return n;
}

void rl_tok_bpe(const struct rl_tokenizer *tok, const unsigned char *s, size_t len,
                struct rl_tok_ids *out)
{
	enum { SMALL = 64 };
	struct symbol sym_small[SMALL], *sym = sym_small;
	struct merge heap_small[3 * SMALL], *heap = heap_small;
	char word_small[2 * SMALL], *word = word_small;
	size_t n, nheap = 0;

	if (len == 0)
		return;
	if (len > SMALL) {
		sym = malloc(len * sizeof(*sym));
		heap = malloc(3 * len * sizeof(*heap));
		word = malloc(2 * len);
		if (!sym || !heap || !word) {
			out->ok = false;
			goto done;
		}
	}
	if (tok->ignore_merges) {
		int32_t id = whole_word(tok, s, len, word);

		if (id >= 0) {
			rl_tok_ids_push(out, id);
			goto done;
		}
	}
	n = initial_symbols(tok, s, len, sym);
	for (size_t i = 0; i + 1 < n; i++)
		queue_pair(tok, sym, (int32_t)i, heap, &nheap);
	while (nheap > 0) {
		struct merge top = heap_pop(heap, &nheap);
		struct symbol *left = &sym[top.pos];
		const struct rl_tok_merge *m;

		if (left->gone || left->next < 0)
			continue;
		/* a stale entry: the pair has changed since it was queued */
		m = rl_tok_merges_find(&tok->merges, left->id, sym[left->next].id);
		if (!m || m->new_id != top.new_id)
			continue;
		struct symbol *right = &sym[left->next];
		left->id = top.new_id;
		left->next = right->next;
		right->gone = true;
		if (right->next >= 0)
			sym[right->next].prev = top.pos;
		queue_pair(tok, sym, left->prev, heap, &nheap);
		queue_pair(tok, sym, top.pos, heap, &nheap);
	}
	for (int32_t i = n > 0 ? 0 : -1; i >= 0; i = sym[i].next)
		rl_tok_ids_push(out, sym[i].id);
done:
	if (sym != sym_small) {
		free(sym);
		free(heap);
		free(word);
	}
}
