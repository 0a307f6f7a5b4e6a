/* rl_tb_dump FILE...: reads TensorBoard event files record by record,
 * checking each length and data CRC, decodes each Event with protobuf-c
 * and prints one line per scalar, "STEP TAG VALUE", and "purge STEP" for a
 * restart marker. Exit 1 on a bad record, naming the file and the offset;
 * the first record of a file must be its file_version "brain.Event:2". */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/logger/tb_event.pb-c.h"
#include "runtime/logger/tensorboard.h"

static uint64_t get_le(const unsigned char *p, int bytes)
{
	uint64_t v = 0;
	for (int i = bytes - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static int dump(const char *path)
{
	FILE *f = fopen(path, "rb");
	unsigned char head[12], foot[4];
	long at = 0;
	int records = 0;

	if (!f) {
		perror(path);
		return 1;
	}
	for (;; records++) {
		size_t got = fread(head, 1, sizeof head, f);
		if (got == 0 && feof(f))
			break;
		if (got != sizeof head || get_le(head + 8, 4) != rl_tb_masked_crc(head, 8)) {
			fprintf(stderr, "%s: offset %ld: bad record length or its CRC\n", path, at);
			return 1;
		}
		uint64_t n = get_le(head, 8);
		if (n > 1 << 20) {
			fprintf(stderr, "%s: offset %ld: a record of %llu bytes\n", path, at,
			        (unsigned long long)n);
			return 1;
		}
		unsigned char *data = malloc(n ? n : 1);
		if (!data || fread(data, 1, n, f) != n || fread(foot, 1, 4, f) != 4 ||
		    get_le(foot, 4) != rl_tb_masked_crc(data, n)) {
			fprintf(stderr, "%s: offset %ld: record cut short or its data CRC wrong\n",
			        path, at);
			return 1;
		}
		Tensorboard__Event *ev = tensorboard__event__unpack(NULL, n, data);
		free(data);
		if (!ev) {
			fprintf(stderr, "%s: offset %ld: not an Event\n", path, at);
			return 1;
		}
		if (records == 0 && (ev->what_case != TENSORBOARD__EVENT__WHAT_FILE_VERSION ||
		                     strcmp(ev->file_version, "brain.Event:2") != 0)) {
			fprintf(stderr, "%s: the first record is not file_version brain.Event:2\n",
			        path);
			return 1;
		}
		if (ev->what_case == TENSORBOARD__EVENT__WHAT_SUMMARY)
			for (size_t i = 0; i < ev->summary->n_value; i++)
				printf("%lld %s %.9g\n", (long long)ev->step,
				       ev->summary->value[i]->tag,
				       ev->summary->value[i]->simple_value);
		if (ev->what_case == TENSORBOARD__EVENT__WHAT_SESSION_LOG &&
		    ev->session_log->status == TENSORBOARD__SESSION_LOG__SESSION_STATUS__START)
			printf("purge %lld\n", (long long)ev->step);
		tensorboard__event__free_unpacked(ev, NULL);
		at += (long)(sizeof head + n + sizeof foot);
	}
	fclose(f);
	return records ? 0 : 1;
}

int main(int argc, char **argv)
{
	int rc = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: rl_tb_dump FILE...\n");
		return 2;
	}
	for (int i = 1; i < argc; i++)
		rc |= dump(argv[i]);
	return rc;
}
