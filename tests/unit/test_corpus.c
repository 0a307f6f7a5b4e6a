/* The fuzz corpus as a regression suite (under ASan/UBSan in CI): every
 * input either loads or fails with at least one diagnostic, and whatever
 * loads prints YAML that loads again to the same printout. */
#include "tests/unit/helpers.h"

#include <dirent.h>

static char *print_config(const struct rl_config *c)
{
	char *out = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&out, &n);
	cr_assert_eq(rl_config_write_yaml(c, f), 0);
	fclose(f);
	return out;
}

Test(corpus, every_input_loads_or_says_why)
{
	const char *top = getenv("top_srcdir") ? getenv("top_srcdir") : ".";
	char *dir_path = NULL;
	cr_assert_geq(asprintf(&dir_path, "%s/tests/fuzz/corpus", top), 0);
	DIR *dir = opendir(dir_path);
	cr_assert_not_null(dir, "%s", dir_path);
	int files = 0, loaded = 0;
	for (struct dirent *e; (e = readdir(dir));) {
		if (e->d_name[0] == '.')
			continue;
		char *path = NULL;
		cr_assert_geq(asprintf(&path, "%s/%s", dir_path, e->d_name), 0);
		size_t len;
		char *text = slurp(path, &len);
		struct rl_config c;
		struct rl_diags d = {0};
		int rc = rl_config_load_text(e->d_name, text, len, "/nonexistent-corpus-dir", NULL,
		                             0, &c, &d);
		if (rc != 0) {
			cr_expect_gt(d.n, 0, "%s failed without a diagnostic", e->d_name);
		} else {
			cr_expect_eq(d.n, 0, "%s loaded with diagnostics", e->d_name);
			char *first = print_config(&c);
			struct rl_config again;
			struct rl_diags d2 = {0};
			cr_expect_eq(rl_config_load_text("again", first, strlen(first), NULL, NULL,
			                                 0, &again, &d2),
			             0, "%s: printed config does not load:\n%s\n%s", e->d_name,
			             first, diag_text(&d2));
			if (d2.n == 0) {
				char *second = print_config(&again);
				cr_expect_str_eq(first, second, "%s: printout changes on reload",
				                 e->d_name);
				free(second);
				rl_config_free(&again);
			}
			rl_diags_free(&d2);
			free(first);
			rl_config_free(&c);
			loaded++;
		}
		rl_diags_free(&d);
		free(text);
		free(path);
		files++;
	}
	closedir(dir);
	free(dir_path);
	cr_expect_gt(files, 100, "the corpus is there");
	cr_log_info("%d corpus inputs, %d valid configs", files, loaded);
}
