# Helpers of the tests. The sample inputs in inputs/*.json load as
# data.inputs.<file name>, so every test starts from a realistic input.
package ccm_test

import data.ccm

denials(inp) := d if {
	d := ccm.deny with input as inp
}

warnings(inp) := w if {
	w := ccm.warn with input as inp
}

# codes returns the codes of the deny messages for inp; plain string messages
# count as code "".
codes(inp) := {code(m) | some m in denials(inp)}

code(m) := m.code if is_object(m)

code(m) := "" if is_string(m)

# texts returns the texts of the deny messages for inp.
texts(inp) := {text(m) | some m in denials(inp)}

text(m) := m.msg if is_object(m)

text(m) := m if is_string(m)

test_sample_default_service_allowed if {
	count(denials(data.inputs.lb_create_default)) == 0
	count(warnings(data.inputs.lb_create_default)) == 0
}

test_sample_route_allowed if {
	count(denials(data.inputs.route_create)) == 0
}

test_sample_labelled_namespace_change_type_allowed if {
	count(denials(data.inputs.lb_update_change_type)) == 0
}
