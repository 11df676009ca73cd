/* See slurm.h here: the log calls libslurm gives a plugin, which prep_harness.c provides. */
extern void slurm_info(const char *format, ...);
extern void slurm_error(const char *format, ...);
