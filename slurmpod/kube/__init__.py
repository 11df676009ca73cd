"""slurmpod.kube: the one seam between slurmpod and the Kubernetes API server.

  access    where the API server is and who we are (in-cluster settings)
  seam      the Kube protocol every caller takes as a parameter, and the typed objects it writes
  library   the one real implementation, over the maintained Kubernetes client library

Tests drive a recording fake (tests/fakes/kube.py). Every call has a deadline, and any failure is an
error: a caller never reads "the API did not answer" as "no nodes" or "nothing changed".
"""
