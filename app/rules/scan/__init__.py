"""Server-side scan planning's rules: pure functions, no I/O.

``filter`` turns the spec's expression JSON into bound PyIceberg expressions (and back),
``planning`` decides which files a scan reads from manifests a caller hands in (it reads none
itself: ``ManifestSource``), and ``files`` writes the chosen files in the spec's ``ContentFile``
shape; ``restricted`` cuts a plan to what a caller's read restrictions leave it (issue 51). The
service that runs a plan, stores it and answers the polls is ``app/planning/service.py``.
"""
