// Validate a JSON file against a JSON schema with ajv (test_export).
// Usage: NODE_PATH=.../node_modules node export_schema.js SCHEMA FILE
'use strict';
const Ajv = require('ajv');
const fs = require('fs');

const schema = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const data = JSON.parse(fs.readFileSync(process.argv[3], 'utf8'));
const ajv = new Ajv({allErrors: true, strict: false});
const validate = ajv.compile(schema);
if (!validate(data)) {
	console.error(JSON.stringify(validate.errors.slice(0, 10), null, 1));
	process.exit(1);
}
console.log('valid:', process.argv[3]);
