/* Runs a hook N times the way slurmd's run_command() does (output and errors to one pipe, read to end of
 * file, then waitpid(WNOHANG)) and prints in how many runs the hook could not be reaped yet at end of
 * file: the runs where slurmd sleeps 10 ms or more before it goes on.
 * Ref: run_command_poll_child and run_command_waitpid_timeout, Slurm's src/common/run_command.c */
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s RUNS PROGRAM\n", argv[0]);
        return 2;
    }
    int runs = atoi(argv[1]), late = 0, failed = 0;
    for (int i = 0; i < runs; i++) {
        int pfd[2];
        if (pipe(pfd) != 0)
            return 1;
        pid_t pid = fork();
        if (pid < 0)
            return 1;
        if (pid == 0) {
            setpgid(0, 0);
            int null = open("/dev/null", O_RDONLY);
            dup2(null, STDIN_FILENO);
            dup2(pfd[1], STDOUT_FILENO);
            dup2(pfd[1], STDERR_FILENO);
            close(pfd[0]);
            close(pfd[1]);
            execv(argv[2], &argv[2]);
            _exit(127);
        }
        close(pfd[1]);
        char buf[4096];
        for (;;) {
            struct pollfd p = {.fd = pfd[0], .events = POLLIN | POLLHUP | POLLRDHUP};
            if (poll(&p, 1, 30000) <= 0 || !(p.revents & POLLIN) || read(pfd[0], buf, sizeof buf) <= 0)
                break;
        }
        int status = 0;
        if (waitpid(pid, &status, WNOHANG) == 0) {
            late++;
            waitpid(pid, &status, 0);
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            failed++;
        close(pfd[0]);
    }
    printf("%d late, %d failed of %d\n", late, failed, runs);
    return 0;
}
