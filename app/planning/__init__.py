"""Scan planning as the REST spec runs it (planTableScan, fetchPlanningResult, fetchScanTasks, cancelPlanning)."""
