-- Sharing an organization's private registry modules with other
-- organizations of the site (Terraform Enterprise's module sharing; the
-- admin organizations API, internal/organization): global_module_sharing
-- shares them with every organization; organization_module_consumers
-- names the organizations that may use organization_name's modules
-- (setting them turns global sharing off). The model's OrgReadModules
-- lets the members and tokens of a consumer fetch the modules through
-- the registry protocol (terraform init); nothing else of the sharing
-- organization.
ALTER TABLE organizations ADD COLUMN global_module_sharing BOOLEAN NOT NULL DEFAULT FALSE;

CREATE TABLE organization_module_consumers (
    organization_name TEXT NOT NULL REFERENCES organizations (name) ON UPDATE CASCADE ON DELETE CASCADE,
    consumer_name TEXT NOT NULL REFERENCES organizations (name) ON UPDATE CASCADE ON DELETE CASCADE,
    PRIMARY KEY (organization_name, consumer_name)
);
CREATE INDEX organization_module_consumers_consumer ON organization_module_consumers (consumer_name);
