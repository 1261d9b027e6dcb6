-- The engine version a stack's deployments run with (the terraform-version
-- of their workspaces; '' is the server's default). A Terrace extension:
-- HCP Terraform picks the version itself.
ALTER TABLE stacks ADD COLUMN terraform_version TEXT NOT NULL DEFAULT '';
