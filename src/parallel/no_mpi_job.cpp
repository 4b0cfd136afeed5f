// A build without MPI: every process is a job of one. Started by mpirun anyway, each rank would
// run the whole model alone and print the same output: an error instead.
#include <cstdlib>

#include "ggml-like/core/error.h"
#include "src/parallel/job.h"

namespace latte {

std::unique_ptr<Job> join_mpi_job() {
  if (std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMIX_RANK") || std::getenv("PMI_RANK"))
    ggl::fail(
        "started by mpirun, but this latte was built without MPI (configure with Open MPI installed, "
        "-DLATTE_MPI=ON)");
  return nullptr;
}

}  // namespace latte
