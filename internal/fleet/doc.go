// Package fleet is a wing of internal/: hosts and their GPUs. gpu (a
// host's lease pool), hosts (the fleet register), provision (Slurm jobs
// and EC2 instances), preempt (spot notices) and metrics (the worker's
// Prometheus endpoint). It stands on floor 6.
package fleet
