//! Message formats: the CIRCE `# MESSAGE` header block and TX YAML front matter.
