"""Moving tables home: from a federated warehouse into a native one (issue 50)."""
