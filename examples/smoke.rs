use std::time::{Duration, Instant};
fn main() {
    let r = fibra::run(|| {
        let a = fibra::spawn(|| {
            for i in 0..3 {
                println!("a {i}");
                fibra::yield_now();
            }
            1
        });
        let b = fibra::spawn(|| {
            for i in 0..3 {
                println!("b {i}");
                fibra::yield_now();
            }
            2
        });
        let t = Instant::now();
        fibra::sleep(Duration::from_millis(10));
        println!("slept {:?}", t.elapsed());
        a.join().unwrap() + b.join().unwrap()
    });
    println!("r = {r}");
    let e = fibra::run(|| fibra::spawn(|| panic!("boom")).join().unwrap_err());
    println!("{e}");
}
