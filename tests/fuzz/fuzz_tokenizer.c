/* libFuzzer target for the tokenizer.json loader: any bytes as the file,
 * then, when it loads, a fixed text and the input's own first bytes encoded
 * and decoded back, so that a table sized or indexed by an id from the file
 * is walked. `make fuzz` runs it; make check feeds it its corpus
 * (fuzz_main.c), so that it keeps building. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "runtime/tokenizer/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char text[] = "Hello, world! <s>café</s> 123 \xff\xfe\n\t  x";
	struct rl_tokenizer *tok;
	char err[512];

	if (rl_tokenizer_load_json(&tok, (const char *)data, size, "fuzz/tokenizer.json", err,
	                           sizeof err))
		return 0;
	for (int pass = 0; pass < 2; pass++) {
		const char *in = pass ? (const char *)data : text;
		size_t len = pass ? (size < 256 ? size : 256) : sizeof text - 1;
		int32_t *ids = NULL;
		size_t n = 0;
		char *back = NULL;
		size_t back_len;

		if (rl_tokenizer_encode(tok, in, len, pass == 0, &ids, &n, err, sizeof err) == 0 &&
		    rl_tokenizer_decode(tok, ids, n, pass == 1, &back, &back_len, err,
		                        sizeof err) == 0)
			free(back);
		free(ids);
	}
	int32_t probe[] = {
	    0, 1, rl_tokenizer_vocab_size(tok) - 1, rl_tokenizer_vocab_size(tok), -1, INT32_MAX};
	for (size_t i = 0; i < sizeof probe / sizeof *probe; i++) {
		const char *s = rl_tokenizer_id_to_token(tok, probe[i]);

		if (s)
			(void)rl_tokenizer_token_to_id(tok, s);
	}
	rl_tokenizer_free(tok);
	return 0;
}
