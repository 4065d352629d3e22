// fork() after init(): the child gets a copy of the parent's memory, including the context,
// but not its threads, and it shares the parent's sockets, epoll sets and shared memory.
// Tearing any of that down from the child (an exit hook, a destructor, MPI_Finalize) would
// break the parent's job, so a forked child abandons the copy untouched: its requests fail
// at once with a message, its exit hooks do nothing, and it may call init() for a job of
// its own.
#ifndef TUTTI_SRC_AT_FORK_H_
#define TUTTI_SRC_AT_FORK_H_

namespace tutti {

// The pid of the initialized process this one was forked from (the most recent such
// fork), or 0 when this process did not inherit an initialized tutti.
int ForkedFrom();
void SetForkedFrom(int parent_pid);

}  // namespace tutti

#endif  // TUTTI_SRC_AT_FORK_H_
