"""What runs inside the trainer image: turns a resolved GRPOJob spec into an engine run."""

__version__ = "0.1.0"
