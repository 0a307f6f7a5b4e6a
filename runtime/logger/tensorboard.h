/* TensorBoard event files: the records TensorBoard's readers take (its
 * `Event` protocol buffer, tb_event.proto, in TFRecord framing), written
 * one scalar per record as torch's SummaryWriter.add_scalar writes them.
 * defines: struct rl_tb_writer, rl_tb_crc32c, rl_tb_masked_crc, rl_tb_open,
 * rl_tb_open_file, rl_tb_scalar, rl_tb_purge_from, rl_tb_flush, rl_tb_close */
#ifndef RL_LOGGER_TENSORBOARD_H
#define RL_LOGGER_TENSORBOARD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct rl_tb_writer {
	FILE *f;
	char *path;
};

/* CRC-32C (Castagnoli) of n bytes, and TFRecord's mask of it. */
uint32_t rl_tb_crc32c(const void *data, size_t n);
uint32_t rl_tb_masked_crc(const void *data, size_t n);

/* Creates DIR (and its parents) and in it a new file
 * events.out.tfevents.<seconds>.<host>.<pid>.0, named as TensorBoard's
 * own writer names them, and writes its first record (file_version
 * "brain.Event:2" at wall time `now`). An existing file is never
 * touched: a resumed run writes a file of its own. 0, or -1 with err. */
int rl_tb_open(struct rl_tb_writer *w, const char *dir, double now, char *err, size_t errlen);
/* The same into the named file, which must not exist yet. */
int rl_tb_open_file(struct rl_tb_writer *w, const char *path, double now, char *err, size_t errlen);
/* Appends one scalar (TensorBoard keeps it as a 32-bit float) at step. */
int rl_tb_scalar(struct rl_tb_writer *w, const char *tag, double value, int64_t step,
                 double wall_time, char *err, size_t errlen);
/* A restart marker (SessionLog START) at step: TensorBoard's reader drops
 * every event of an earlier file from that step on, the steps a resumed
 * run is about to redo. */
int rl_tb_purge_from(struct rl_tb_writer *w, int64_t step, double wall_time, char *err,
                     size_t errlen);
/* Hands what was written to the kernel, so that a killed run keeps it. */
int rl_tb_flush(struct rl_tb_writer *w, char *err, size_t errlen);
void rl_tb_close(struct rl_tb_writer *w);

#endif
