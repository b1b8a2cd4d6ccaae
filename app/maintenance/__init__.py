"""Table maintenance (issue 37): policies, the executor and its runs, jobs, the rewrites, Spark."""
