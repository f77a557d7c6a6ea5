from services.process_table.main import main

main()
