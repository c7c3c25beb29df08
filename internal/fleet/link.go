package fleet

// Link is what a process judges of its link to a store: Down since a
// store call failed with Err, when DownAt status reads of the store had
// been started. Only the answer of a read started after that says the
// store is back: a read already on its way when the call failed may have
// been answered before the failure, and says nothing of the store since.
//
// It is the one rule for the link: each shared breaker's State keeps a
// Link of its own calls, and each hub of the manager one of its watch and
// its reads. The zero Link is up.
type Link struct {
	Down   bool
	DownAt uint64
	Err    error
}

// Fail is the link after a store call failed with err, when asked status
// reads had been started; lost reports whether it was up until then.
func (l Link) Fail(err error, asked uint64) (next Link, lost bool) {
	if l.Down {
		l.Err = err
		return l, false
	}
	return Link{Down: true, DownAt: asked, Err: err}, true
}

// Answer is the link after the seq-th status read answered; back reports
// whether that ends its being down.
func (l Link) Answer(seq uint64) (next Link, back bool) {
	if !l.Down || seq <= l.DownAt {
		return l, false
	}
	return Link{}, true
}
