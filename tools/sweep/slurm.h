// The Slurm backend (`trnsim sweep SWEEP.json --backend slurm`): one `sbatch --array` job array per
// submission, at most `max_running` tasks at once (the array's %N), each task running its slice of the
// points that have no final row with `trnsim sweep task` (a pool of one worker, or SLURM_CPUS_PER_TASK)
// and writing their rows to DIR/points/ (a folder every node sees). `trnsim sweep status DIR` counts the
// rows and asks squeue about the submissions; `trnsim sweep collect DIR` writes the results and the report;
// `trnsim sweep resubmit DIR` submits again the points that failed or have no row.
//
// DIR/slurm/<n>/: tasks.json (the workload, the working directory, the points per task and their keys and
// --set assignments), job.sh (the batch script), job_id, task-<i>.log (each task's output).
#pragma once

#include <string>
#include <vector>

namespace trnsim::sweep {

struct SlurmOptions {
  int max_running = 8;                   // the array's %N
  int points_per_task = 0;               // 0: about 100 tasks
  std::vector<std::string> sbatch_args;  // passed to sbatch before the script (e.g. --partition=cpu)
  bool wait = false;                     // wait for the array to finish, then collect
  double wait_timeout_seconds = 0;       // with wait: give up after this long (0: never)
  bool keep_stats = false;
  double timeout_seconds = 0;  // per point
  bool report = true;
};

// Submits DIR's plan's unfinished points (plan.json must be complete). Returns the exit code.
int slurm_submit(const std::string& dir, const SlurmOptions& o);
// `trnsim sweep task SUBMISSION_DIR --task I`: runs task I's slice.
int slurm_task(const std::string& submission_dir, int task, int jobs);
// `trnsim sweep status DIR`.
int sweep_status(const std::string& dir);

}  // namespace trnsim::sweep
