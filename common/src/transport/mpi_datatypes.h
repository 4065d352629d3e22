// MPI datatypes and reduction ops for tutti's dtypes.
#ifndef TUTTI_SRC_MPI_DATATYPES_H_
#define TUTTI_SRC_MPI_DATATYPES_H_

#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/status.h"

#include "tutti/c_api.h"

namespace tutti {

// The MPI type with the dtype's storage layout (float16/bfloat16/bool as unsigned integers).
MPI_Datatype StorageDatatype(tutti_dtype dtype);

// An unsigned integer type of `element_size` bytes (1, 2, 4 or 8), for data moved as is.
MPI_Datatype ElementDatatype(size_t element_size);

// The built-in MPI op that matches our semantics, or MPI_OP_NULL when a user op is needed
// (float16/bfloat16 arithmetic, NaN-propagating float MIN/MAX).
MPI_Op BuiltinOp(tutti_dtype dtype, tutti_reduce_op op);

// The function for a user-defined MPI op computing `op` on `dtype`.
MPI_User_function* UserFunction(tutti_dtype dtype, tutti_reduce_op op);

// MPI's vector collectives take int counts and displacements: converts element counts, or
// fails when they do not fit.
Status MpiCounts(const std::vector<int64_t>& counts, std::vector<int>* ints,
                 std::vector<int>* offsets);

}  // namespace tutti

#endif  // TUTTI_SRC_MPI_DATATYPES_H_
