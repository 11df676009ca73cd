/* slurmpod-mpi-hello: the smallest proof that MPI works across pods under `srun --mpi=pmix`.
 * Each rank prints its rank, the job size, its host (the pod) and the sum of all ranks from one
 * MPI_Allreduce, which must be size*(size-1)/2 on every rank. Compiled in the worker image build.
 * Ref: https://www.mpi-forum.org/docs/mpi-4.1/mpi41-report.pdf (MPI_Allreduce, MPI_Get_processor_name)
 */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank = 0, size = 0, sum = -1, len = 0;
    char host[MPI_MAX_PROCESSOR_NAME] = "";

    if (MPI_Init(&argc, &argv) != MPI_SUCCESS)
        return 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Get_processor_name(host, &len);
    if (MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS)
        return 1;
    printf("mpi-hello rank=%d size=%d host=%s allreduce_sum=%d\n", rank, size, host, sum);
    fflush(stdout);
    MPI_Finalize();
    return sum == size * (size - 1) / 2 ? 0 : 3;
}
