from fabricase.cli import main

main()
