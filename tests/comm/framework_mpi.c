/* The framework-style job under mpirun: MPI starts the ranks and carries
 * the unique ids (MPI_Bcast from rank 0), zcomm does the communication.
 * Usage: mpirun -np N framework_mpi */
#include <mpi.h>

#include "framework_job.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  zc_unique_id ids[2];
  int ok = 1;
  if (rank == 0)
    for (int i = 0; i < 2; ++i)
      if (zc_get_unique_id(&ids[i]) != ZC_OK) {
        fprintf(stderr, "rank 0: zc_get_unique_id: %s\n", zc_last_error(NULL));
        ok = 0;
      }
  MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!ok) MPI_Abort(MPI_COMM_WORLD, 1);
  MPI_Bcast(ids, (int)sizeof(ids), MPI_BYTE, 0, MPI_COMM_WORLD);
  int rc = fw_job(rank, n, ids);
  int worst = 0;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0 && worst == 0) printf("framework job of %d ranks under MPI: every rank passed\n", n);
  MPI_Finalize();
  return worst;
}
