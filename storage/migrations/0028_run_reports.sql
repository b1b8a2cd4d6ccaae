-- A Spark job's report channel for cluster deploy mode (issue 49, app/maintenance/spark.py,
-- storage/maintenance_jobs.py).
--
-- In cluster deploy mode the job's driver runs on the cluster, so Growler cannot read the progress
-- and result lines it prints. The job reports them through the management API instead
-- (reportMaintenanceRun), bound to its run by a token Growler gives that job alone: only the
-- token's SHA-256 is kept here (report_token_hash), set when the job is submitted. The job's
-- result (the counts of Iceberg's rewrite_data_files) or its error waits in job_result until the
-- runner, once the driver has ended, records the run's outcome from it.
ALTER TABLE maintenance_run ADD COLUMN report_token_hash bytea, ADD COLUMN job_result jsonb;
