// The embedded boot scripts of provisioned hosts (Slurm job, EC2 user data).

// Package deploy holds what a deployment runs beside the binaries: the
// Dockerfiles, the systemd unit of a static host, and the scripts a
// provisioned host boots with. The provisioners fill those scripts in
// from the files here (embedded), so what is read here is what runs.
package deploy

import _ "embed"

// SlurmJob is the batch script of an attempt's Slurm job, a text/template
// over provision's job fields.
//
//go:embed slurm-job.sh
var SlurmJob string

// EC2UserData is the user data of an attempt's EC2 instance, a
// text/template over provision's instance fields.
//
//go:embed ec2-user-data.sh
var EC2UserData string
