"""The demo's array step: each task's line says its index of the array's task count, not the job id."""

from __future__ import annotations

import subprocess

from slurmpod_host.cluster import demo


def _wrap_output(task: int, count: int, job: str, host: str) -> str:
    """What the array's --wrap prints, run by the shell with the variables sbatch sets."""
    env = {"SLURM_ARRAY_TASK_ID": str(task), "SLURM_ARRAY_TASK_COUNT": str(count), "SLURM_ARRAY_JOB_ID": job,
           "PATH": "/usr/bin:/bin"}
    script = demo.TASK_WRAP.replace("$(hostname)", host)
    return subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True, check=True,
                          timeout=10).stdout


def test_a_task_line_reads_back_with_its_count_and_job() -> None:
    text = _wrap_output(3, 20, "2", "w-1") + _wrap_output(0, 20, "2", "w-0")
    assert demo.parse_tasks(text) == [demo.TaskLine(3, 20, "2", "w-1"), demo.TaskLine(0, 20, "2", "w-0")]


def test_printed_lines_show_the_task_count_not_the_job_id() -> None:
    assert demo.task_lines([(0, "w-0"), (3, "w-1")], demo.ARRAY_TASKS) == [
        f"task 0 of {demo.ARRAY_TASKS} ran on w-0", f"task 3 of {demo.ARRAY_TASKS} ran on w-1"]


def test_lines_of_other_output_are_not_tasks() -> None:
    assert demo.parse_tasks("task 3 of 2 ran on w-1\nsomething else\n") == []
