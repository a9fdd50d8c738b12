"""fabricase: find the degraded link in a GPU training fabric, bundle the evidence, file and track the ticket."""

__version__ = "0.1.0"
