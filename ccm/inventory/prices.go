package inventory

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Currency is the currency of every amount: Hetzner Cloud bills in euros, and the prices of
// GET /load_balancer_types name no currency.
const Currency = "EUR"

// micros is an amount in millionths of the currency: sums of them are exact.
type micros int64

func (m micros) float() float64 { return float64(m) / 1e6 }

// amount is a monthly price, net and gross.
type amount struct{ net, gross micros }

// Row is one prices[] entry of a load balancer type: the monthly price of the type at a
// location, as the API's decimal strings (hcloud-go's LoadBalancerTypeLocationPricing.Monthly
// Net and Gross, or schema.PricingLoadBalancerTypePrice.PriceMonthly).
type Row struct {
	// Type is the load balancer type's name, e.g. "lb11".
	Type string
	// Location is the location's name, e.g. "fsn1".
	Location string
	// NetworkZone is the location's network zone; "" takes it from the locations Hetzner had
	// when this was written (knownZones), and a location missing there has none.
	NetworkZone string
	// MonthlyNet is the monthly net price, a decimal string such as "5.0000".
	MonthlyNet string
	// MonthlyGross is the monthly gross price, a decimal string such as "5.9500".
	MonthlyGross string
}

// knownZones maps Hetzner's locations to their network zones (GET /locations, network_zone),
// used to price a load balancer that names only a network zone when a Row names none.
var knownZones = map[string]string{
	"fsn1": "eu-central", "nbg1": "eu-central", "hel1": "eu-central",
	"ash": "us-east", "hil": "us-west", "sin": "ap-southeast",
}

// Prices are the monthly prices of load balancer types per location. The zero value knows no
// price: every load balancer is priced as unknown (known: false, amounts 0).
type Prices struct {
	byLocation map[string]amount // key: type + "@" + location
	byZone     map[string]amount // key: type + "@" + zone, the highest price among its locations
}

// NewPrices returns the prices of the rows. It fails, naming the row, when an amount is not a
// decimal number or is negative, or when a type or location is empty.
func NewPrices(rows []Row) (Prices, error) {
	p := Prices{byLocation: map[string]amount{}, byZone: map[string]amount{}}
	for i, r := range rows {
		a, err := parseRow(r)
		if err != nil {
			return Prices{}, fmt.Errorf("load balancer prices: row %d (%s at %s): %w", i, r.Type, r.Location, err)
		}
		p.byLocation[r.Type+"@"+r.Location] = a
		zone := r.NetworkZone
		if zone == "" {
			zone = knownZones[r.Location]
		}
		if zone == "" {
			continue
		}
		key := r.Type + "@" + zone
		if old, ok := p.byZone[key]; !ok || a.gross > old.gross || (a.gross == old.gross && a.net > old.net) {
			p.byZone[key] = a
		}
	}
	return p, nil
}

func parseRow(r Row) (amount, error) {
	if r.Type == "" || r.Location == "" {
		return amount{}, errors.New("type and location must not be empty")
	}
	net, err := parseDecimal(r.MonthlyNet)
	if err != nil {
		return amount{}, fmt.Errorf("price_monthly.net: %w", err)
	}
	gross, err := parseDecimal(r.MonthlyGross)
	if err != nil {
		return amount{}, fmt.Errorf("price_monthly.gross: %w", err)
	}
	return amount{net: net, gross: gross}, nil
}

// parseDecimal reads a non-negative decimal string ("5.3900000000") into micros, rounding
// beyond six decimals half up.
func parseDecimal(s string) (micros, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%q is not a decimal number", s)
	}
	if f < 0 || f > 1e9 {
		return 0, fmt.Errorf("%q is out of range (0 to 1e9)", s)
	}
	return micros(math.Round(f * 1e6)), nil
}

// Empty reports whether the prices know no price at all.
func (p Prices) Empty() bool { return len(p.byLocation) == 0 }

// lookup returns the monthly price of a type at a location, or, when the location is "", the
// highest price among the network zone's locations; ok is false when no price is listed.
func (p Prices) lookup(typ, location, zone string) (amount, bool) {
	if location != "" {
		a, ok := p.byLocation[typ+"@"+location]
		return a, ok
	}
	a, ok := p.byZone[typ+"@"+zone]
	return a, ok
}

// typesBody is the part of the body of GET /load_balancer_types that prices are read from.
type typesBody struct {
	LoadBalancerTypes *[]struct {
		Name   string `json:"name"`
		Prices []struct {
			Location     string `json:"location"`
			PriceMonthly struct {
				Net   string `json:"net"`
				Gross string `json:"gross"`
			} `json:"price_monthly"`
		} `json:"prices"`
	} `json:"load_balancer_types"`
}

// ParsePrices reads the prices from the JSON body of GET /load_balancer_types (the file
// `plan --prices` takes). It fails with the reason when the body is not that JSON: not JSON,
// no "load_balancer_types" list, or a price that is not a decimal string.
func ParsePrices(body []byte) (Prices, error) {
	var b typesBody
	if err := json.Unmarshal(body, &b); err != nil {
		return Prices{}, fmt.Errorf("parse load balancer prices: want the JSON body of GET /load_balancer_types: %w", err)
	}
	if b.LoadBalancerTypes == nil {
		return Prices{}, errors.New(`parse load balancer prices: no "load_balancer_types" list: want the JSON body of GET /load_balancer_types`)
	}
	var rows []Row
	for _, t := range *b.LoadBalancerTypes {
		for _, pr := range t.Prices {
			rows = append(rows, Row{Type: t.Name, Location: pr.Location, MonthlyNet: pr.PriceMonthly.Net, MonthlyGross: pr.PriceMonthly.Gross})
		}
	}
	p, err := NewPrices(rows)
	if err != nil {
		return Prices{}, fmt.Errorf("parse load balancer prices: %w", err)
	}
	return p, nil
}
