// Package store is a wing of internal/: where bytes live and how they
// are read safely. blob (the file and S3 stores, the read-only overlay),
// checkpoint (content-addressed workspaces; layout.go names every key
// family of the store), logstore (agent logs), bundle (signed run
// bundles) and safefs (a tree an agent writes, read through
// descriptors). It stands on floor 2.
package store
