package fleetsim

// Shrink removes events from plan, whose run broke invariant inv, while a
// run of what is left still breaks inv: first halves, then ever smaller
// runs of events, down to one event at a time (a delta debugging pass).
// run runs a plan and returns its violation, nil if none; tries bounds the
// runs made. It returns the shortest plan found.
func Shrink(plan Plan, inv string, tries int, run func(Plan) *Violation) Plan {
	fails := func(p Plan) bool {
		if tries <= 0 {
			return false
		}
		tries--
		v := run(p)
		return v != nil && v.Invariant == inv
	}
	for chunk := max(len(plan.Events)/2, 1); chunk >= 1 && tries > 0; {
		removed := false
		for start := 0; start < len(plan.Events) && tries > 0; {
			end := min(start+chunk, len(plan.Events))
			next := plan.without(func(i int) bool { return i >= start && i < end })
			if fails(next) {
				plan, removed = next, true
				continue // the same start now holds the next events
			}
			start = end
		}
		if !removed {
			if chunk == 1 {
				break
			}
			chunk /= 2
		}
	}
	return plan
}
