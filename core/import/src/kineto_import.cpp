// placeholder: filled in by the importers work
